"""run_parity: every selected case checked on every device (checks/parity.py's CaseChecker through the
runner's device loop), each result appended to the results file as it arrives, the summary written even
when a run is cut short, the phases timed when asked."""
from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from strata_bench.cases import FAMILIES, Case
from strata_bench.checks.outcome import ParityRun, fault_result
from strata_bench.checks.parity import CaseChecker
from strata_bench.checks.phases import PhaseTimes
from strata_bench.checks.refpool import ReferencePool
from strata_bench.runner import loop

Progress = Callable[[str, int], AbstractContextManager]  # (label, total) -> context giving advance()


@dataclass(frozen=True)
class ParityPlan:
    """What a parity run checks and where it keeps the records."""

    cases: Sequence[Case]
    devices: Sequence[int]
    names: dict[int, str]  # device -> product name (results/<device>/ is named after the first)
    results_dir: Path
    rerun: Callable[[Any], str] | None = None  # result -> the command that reruns its case alone
    dump: Any = None  # checks/dump.FailureDump of --dump-failures, or None
    profile: bool = False


@dataclass
class ParityReport:
    """What a finished (or interrupted) run hands back to be rendered."""

    run: ParityRun
    counts: list = field(default_factory=list)  # checks/outcome.DeviceCounts per device
    summary_path: Path | None = None
    sources: tuple = ()  # the real weights' file, sha256, tensor and rows
    times: PhaseTimes | None = None
    wall: float = 0.0

    @property
    def faults(self) -> list:
        return [r for r in self.run.results if r.status.value == "FAULT"]


def run_parity(plan: ParityPlan, progress: Progress | None = None,
               warn: Callable[[str], None] = lambda text: None) -> ParityReport:
    """Check every case of `plan` on each of its devices; the report's summary is written even when a
    device faults or the run is interrupted (then the exception goes on after it)."""
    from strata_bench.cases.fixtures import fixture_sources

    writer = results_writer(plan)
    report = ParityReport(ParityRun(), sources=tuple(fixture_sources(plan.cases)),
                          times=PhaseTimes() if plan.profile else None)

    def keep(result) -> None:
        report.run.results.append(result)
        writer.append(record(result, plan.rerun))

    started = time.perf_counter()
    bar = progress("parity", len(plan.cases) * len(plan.devices)) if progress else nullcontext(lambda *a: None)
    with bar as advance, ReferencePool(plan.cases, FAMILIES, warn=warn) as pool:
        try:
            checker = CaseChecker(report.times, pool=pool, on_failure=plan.dump)
            loop.run_on_devices(list(plan.cases), list(plan.devices), checker, keep, fault_result, advance,
                                compiled=_compile_timer(report.times))
        finally:
            if report.times is not None and pool.seconds is not None:
                report.times.beside["references (pool)"] = pool.seconds
            report.counts = device_counts(report, plan)
            report.summary_path = writer.finish(summary(report, plan.devices), report.run.failures)
    report.wall = time.perf_counter() - started
    return report


def _compile_timer(times: PhaseTimes | None):
    return None if times is None else lambda seconds: times.before.update(compile=seconds)


def results_writer(plan: ParityPlan):
    """One results file per run, in the first device's folder; its provenance lists every device the run
    used and the source closure of every family its cases compile."""
    from strata_bench.results import provenance
    from strata_bench.results.paths import device_directory
    from strata_bench.results.store import ResultsWriter

    prov = provenance.collect(list(plan.devices), families={c.family: FAMILIES[c.family] for c in plan.cases})
    return ResultsWriter(device_directory(plan.results_dir, plan.names[plan.devices[0]]), "parity", prov)


def device_counts(report: ParityReport, plan: ParityPlan) -> list:
    from strata_bench.checks.outcome import device_counts as counts

    return counts(report.run.results, list(plan.devices), plan.names, len(plan.cases))


def summary(report: ParityReport, devices: Sequence[int]) -> dict:
    """The run's summary record, with the counts per device (cases, failures, faults, not run) and the real
    weights' sources."""
    return {**report.run.summary(list(devices)), "per_device": [c.to_record() for c in report.counts],
            "fixtures": list(report.sources)}


def record(result, rerun) -> dict:
    """A case's JSON record; a case that did not pass also holds the command that reruns it."""
    out = result.to_record()
    if rerun is not None and result.status.value != "PASS":
        out["rerun"] = rerun(result)
    return out
