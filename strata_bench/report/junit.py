"""Results as JUnit XML (`--junit FILE` of parity and bench), for a CI's test report: one test case per case
and variant, named `variant` in the class `case`, its failure's message the diagnosis a table shows; and the
run's markdown appended to GitHub Actions' step summary ($GITHUB_STEP_SUMMARY) where it is set."""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence


@dataclass(frozen=True)
class JunitCase:
    classname: str  # the case's name
    name: str  # the variant
    seconds: float
    failure: str | None = None  # the diagnosis, where a check failed
    error: str | None = None  # where the case could not run (a kernel fault)


def parity_cases(results: Iterable[Any]) -> list[JunitCase]:
    """Each variant of each parity result: failed where one of its checks failed (a check of several
    variants, err-equal, counts for each), an error where the case faulted. A device other than 0 is named
    with its variant, so a case run on each GPU is a test case per GPU."""
    out = []
    for result in results:
        checked = (v for c in result.checks for v in c.variant.split(","))
        variants = result.case.variants or tuple(dict.fromkeys(checked)) or ("",)
        share = result.seconds / len(variants)
        for variant in variants:
            name = variant if not result.device else f"{variant} (device {result.device})"
            if result.status.value == "FAULT":
                out.append(JunitCase(result.case.name, name, share, error=result.error or "kernel fault"))
                continue
            failed = [c.detail or f"{c.check} failed" for c in result.checks
                      if not c.ok and variant in c.variant.split(",")]
            out.append(JunitCase(result.case.name, name, share, "; ".join(failed) or None))
    return out


def bench_cases(records: Iterable[Mapping[str, Any]]) -> list[JunitCase]:
    """Each bench record: failed where its figures are not a result (rejected: outputs changed by the timed
    replays, a time under the roofline) or its kernel faulted; its time is the median call's."""
    out = []
    for r in records:
        status = str(r.get("status", ""))
        bad = not (status.startswith("timed") or status.startswith("skipped"))
        seconds = (r.get("median_us") or 0.0) / 1e6
        out.append(JunitCase(str(r.get("case")), str(r.get("variant")), seconds, status if bad else None))
    return out


def junit_xml(suite: str, cases: Sequence[JunitCase]) -> bytes:
    """The <testsuites> document of one suite."""
    failures = sum(c.failure is not None for c in cases)
    errors = sum(c.error is not None for c in cases)
    total = sum(c.seconds for c in cases)
    root = ET.Element("testsuites", tests=str(len(cases)), failures=str(failures), errors=str(errors),
                      time=f"{total:.6f}")
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures),
                         errors=str(errors), skipped="0", time=f"{total:.6f}")
    for c in cases:
        item = ET.SubElement(node, "testcase", classname=c.classname, name=c.name, time=f"{c.seconds:.6f}")
        if c.error is not None:
            ET.SubElement(item, "error", message=_line(c.error), type="KernelFault").text = c.error
        elif c.failure is not None:
            ET.SubElement(item, "failure", message=_line(c.failure), type="CheckFailed").text = c.failure
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _line(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= 500 else first[:497] + "..."


def write_junit(path: str | os.PathLike, suite: str, cases: Sequence[JunitCase]) -> None:
    """The document written whole (a temporary file renamed), so a reader never sees half of it."""
    target = Path(path)
    partial = target.with_name(f".{target.name}.part{os.getpid()}")
    partial.write_bytes(junit_xml(suite, cases))
    os.replace(partial, target)


def append_step_summary(markdown: str) -> Path | None:
    """Append `markdown` to $GITHUB_STEP_SUMMARY where it is set (GitHub Actions renders it on the run's
    page); the file, or None."""
    where = os.environ.get("GITHUB_STEP_SUMMARY")
    if not where:
        return None
    with open(where, "a", encoding="utf-8") as fh:
        fh.write(markdown.rstrip("\n") + "\n\n")
    return Path(where)
