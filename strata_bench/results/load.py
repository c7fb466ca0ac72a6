"""Read a results file back: a summary `.json` (which names its records `.jsonl` beside it) or the
`.jsonl` itself, with its kind (parity, bench, ab, or whatever a writer named it)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from strata_bench.errors import InputError
from strata_bench.results.store import existing, read_records, read_summary


@dataclass(frozen=True)
class Loaded:
    """A results file read back: its kind, the summary (None for a bare .jsonl) and the records."""

    path: Path
    kind: str
    summary: Mapping[str, Any] | None
    records: list[dict[str, Any]]


def load(path: str | Path) -> Loaded:
    """Read a summary or records file; InputError when it is missing, of another type, or orphaned."""
    path = Path(path)
    if not existing(path):
        raise InputError(f"results file not found: {path}")
    if path.suffix not in (".json", ".jsonl"):
        raise InputError(f"results file must be a .json summary or a .jsonl record file, got {path.name!r}")
    summary = read_summary(path) if path.suffix == ".json" else None
    if summary is not None and not existing(path.with_name(str(summary.get("records_file", "")))):
        raise InputError(f"{path.name}: its records file {summary.get('records_file')!r} is missing beside it")
    records = read_records(path)
    kind = infer_kind(path, summary, records)
    if kind == "ab":  # judged again from its records: every field it reads is checked first
        from strata_bench.results.ab_records import check_records

        check_records(records, str(path))
    return Loaded(path, kind, summary, records)


def infer_kind(path: Path, summary: Mapping[str, Any] | None, records: Sequence[Mapping[str, Any]]) -> str:
    """The summary's kind, else the file name's prefix (<kind>-<UTC stamp>.jsonl), else the records."""
    if summary and summary.get("kind"):
        return str(summary["kind"])
    match = re.match(r"(.+?)-\d{8}T\d{6}Z", path.name)
    if match:
        return match.group(1)
    if any(r.get("record") == "plan" for r in records):
        return "ab"
    return "unknown"
