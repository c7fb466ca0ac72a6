"""Is a stored result current? `strata-bench results verify` and `results list` read summaries through here.

A summary is current when the sources it was measured on are unchanged, it records no failures, and its
records file is beside it. Its sources are judged by the closures it recorded (results/closures.py): each
family's files are scanned again from the recorded units, and a family whose files differ is named with
them ("mmvq: kernels_src/mmvq/mmvq.cu changed"), so an edit elsewhere leaves it current. A summary written
before closures were recorded is judged as it always was: its kernels_src hash against the hash of every
file in kernels_src now. Anything else is a problem, named in one short phrase, so a reader of committed
results can tell which ones no longer describe the code.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from strata_bench.errors import InputError
from strata_bench.results import closures
from strata_bench.results.store import read_summary, summary_files
from strata_bench.kernels.sources import kernels_src_hash

HASH_SHOWN = 12  # hex digits of a hash shown in tables


@dataclass(frozen=True)
class SummaryInfo:
    """What a summary says about itself (None where it does not say, or cannot be read)."""

    path: Path
    name: str  # path relative to the directory searched
    kind: str | None = None
    created: str | None = None
    device: str | None = None
    src_hash: str | None = None
    sources: tuple[tuple[str, closures.ClosureRecord], ...] | None = None  # None: no closures recorded
    failures: int | None = None
    records_file: Path | None = None
    unreadable: str | None = None  # why the file is not a usable summary

    @property
    def records_present(self) -> bool:
        return self.records_file is not None and self.records_file.is_file()

    def records_count(self) -> int | None:
        """Complete lines in the records file (None when it is missing)."""
        if not self.records_present:
            return None
        with open(self.records_file, "rb") as fh:  # type: ignore[arg-type]
            return sum(1 for line in fh if line.strip())


@dataclass(frozen=True)
class FileVerdict:
    info: SummaryInfo
    hash_ok: bool | None  # its sources are unchanged (closures, else kernels_src hash); None: no record
    problems: tuple[str, ...]
    stale: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (recorded family, its changes) per changed one

    @property
    def ok(self) -> bool:
        return not self.problems


def read_info(path: Path, directory: Path) -> SummaryInfo:
    name = path.relative_to(directory).as_posix() if path.is_relative_to(directory) else str(path)
    try:
        body = read_summary(path)
    except InputError as exc:
        return SummaryInfo(path, name, unreadable=str(exc).removeprefix(f"{path}: ").removeprefix(f"{path} "))
    prov = body.get("provenance") or {}
    records = body.get("records_file")
    try:
        sources = None if prov.get("sources") is None else tuple(closures.parse(prov["sources"]).items())
    except InputError as exc:
        return SummaryInfo(path, name, unreadable=f"provenance {exc}")
    return SummaryInfo(path, name, kind=body.get("kind"), created=body.get("created"),
                       device=_first_device(prov), src_hash=prov.get("kernels_src_hash"), sources=sources,
                       failures=_int_or_none(body.get("failures")),
                       records_file=path.with_name(records) if isinstance(records, str) and records else None)


def _first_device(prov: dict[str, Any]) -> str | None:
    devices = prov.get("devices") or []
    names = [d.get("name") for d in devices if isinstance(d, dict) and d.get("name")]
    if not names:
        return None
    return names[0] + (f" (+{len(names) - 1})" if len(names) > 1 else "")


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def find_summaries(directory: Path) -> list[SummaryInfo]:
    """Every summary under `directory`, sorted by path; InputError when the directory does not exist."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"results directory not found: {directory}")
    return [read_info(p, directory) for p in summary_files(directory)]


Rescan = Callable[[tuple[closures.Unit, ...]], closures.ClosureRecord]


def judge(info: SummaryInfo, current_hash: str, rescan: Rescan = closures.scan_units) -> FileVerdict:
    """The problems that make one summary not current (none: it is current). `rescan` gives the closure
    of recorded units as the sources stand now (verify shares one cache of them across summaries)."""
    if info.unreadable:
        return FileVerdict(info, None, (info.unreadable,))
    if info.sources is not None:
        stale = stale_sources(info, rescan)
        hash_ok, problems = not stale, [f"{key}: {', '.join(found)}" for key, found in stale]
    else:
        stale = ()
        hash_ok, problems = _judge_hash(info.src_hash, current_hash)
    if info.failures is None:
        problems.append("no failure count recorded")
    elif info.failures:
        problems.append(f"{info.failures} failure(s) recorded")
    if info.records_file is None:
        problems.append("no records file named")
    elif not info.records_present:
        problems.append(f"records file missing: {info.records_file.name}")
    return FileVerdict(info, hash_ok, tuple(problems), stale)


def _judge_hash(recorded: str | None, current_hash: str) -> tuple[bool | None, list[str]]:
    """A summary without closures: its kernels_src hash against the current one (any edit stales it)."""
    if recorded is None:
        return None, ["no kernels_src hash recorded"]
    if recorded != current_hash:
        return False, [f"kernels_src {recorded[:HASH_SHOWN]} != current {current_hash[:HASH_SHOWN]}"]
    return True, []


def stale_sources(info: SummaryInfo, rescan: Rescan = closures.scan_units
                  ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each recorded family whose closure differs now, with what differs (empty: all current)."""
    out = []
    for key, record in info.sources or ():
        found = closures.changes(record, rescan(record.units))
        if found:
            out.append((key, found))
    return tuple(out)


def verify(directory: Path) -> tuple[str, list[FileVerdict]]:
    """(the current kernels_src hash, a verdict per summary under directory)."""
    infos = find_summaries(directory)
    if not infos:
        raise InputError(f"no results summary (*.json) under {directory}")
    current = kernels_src_hash()
    rescan = functools.lru_cache(maxsize=None)(closures.scan_units)  # summaries share their families' units
    return current, [judge(info, current, rescan) for info in infos]
