"""run_parity: every selected case checked on every device (checks/parity.py's CaseChecker through the
the device loop (gpu/loop.py)), each result appended to the results file as it arrives, the summary written even
when a run is cut short, the phases timed when asked."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from strata_bench.checks.ahead import Ahead
from strata_bench.checks.outcome import ParityRun, fault_result
from strata_bench.checks.parity import CaseChecker, error_model_notes
from strata_bench.checks.phases import PhaseTimes
from strata_bench.checks.refpool import ReferencePool
from strata_bench.errors import InputError
from strata_bench.gpu import loop
from strata_bench.runs import Progress, Selection



@dataclass(frozen=True)
class ParityPlan:
    """What a parity run checks and where it keeps the records."""

    selection: Selection
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
    notes: tuple[str, ...] = ()  # what the error models that judged some case allow (checks/parity.py)

    @property
    def faults(self) -> list:
        return [r for r in self.run.results if r.status.value == "FAULT"]


def run_parity(plan: ParityPlan, progress: Progress | None = None,
               warn: Callable[[str], None] = lambda text: None) -> ParityReport:
    """Check every case of `plan` on each of its devices; the report's summary is written even when a
    device faults or the run is interrupted (then the exception goes on after it)."""
    from strata_bench.cases.fixtures import fixture_sources

    sel = plan.selection
    writer = sel.results_writer("parity")
    report = ParityReport(ParityRun(), sources=tuple(fixture_sources(sel.cases)),
                          times=PhaseTimes() if plan.profile else None,
                          notes=tuple(error_model_notes(sel.catalog, sel.cases)))

    def keep(result) -> None:
        report.run.results.append(result)
        writer.append(record(result, plan.rerun))

    started = time.perf_counter()
    with (sel.progress_bar(progress, "parity") as advance, ReferencePool(sel.cases, sel.catalog, warn=warn) as pool,
          Ahead(sel.cases, sel.catalog, pool) as ahead):
        refused = False
        try:
            checker = CaseChecker(report.times, ahead=ahead, on_failure=plan.dump)
            loop.run_on_devices(list(sel.cases), list(sel.devices), sel.catalog, checker, keep, fault_result, advance,
                                compiled=_compile_timer(report.times))
        except InputError:
            refused = not report.run.results  # e.g. a variant's kernels not built: before any case ran
            raise
        finally:
            if refused:
                writer.discard()  # bad input leaves nothing written
            else:
                _finish(report, plan, writer, pool, ahead)
    report.wall = time.perf_counter() - started
    return report


def _finish(report: ParityReport, plan: ParityPlan, writer: Any, pool: ReferencePool, ahead: Ahead) -> None:
    """The summary record, however the loop ended (a device fault and an interrupt included)."""
    _beside(report.times, pool, ahead)
    report.counts = device_counts(report, plan)
    report.summary_path = writer.finish(summary(report, plan.selection.devices), report.run.failures)


def _beside(times: PhaseTimes | None, pool: ReferencePool, ahead: Ahead) -> None:
    """The work beside the loop, for --profile: the reference pool's, and the host side made ahead."""
    if times is None:
        return
    if pool.seconds is not None:
        times.beside["references (pool)"] = pool.seconds
    for part, seconds in ahead.seconds.items():
        if seconds:
            times.beside[f"{part} (ahead)"] = seconds


def _compile_timer(times: PhaseTimes | None):
    return None if times is None else lambda seconds: times.before.update(compile=seconds)


def device_counts(report: ParityReport, plan: ParityPlan) -> list:
    from strata_bench.checks.outcome import device_counts as counts

    sel = plan.selection
    return counts(report.run.results, list(sel.devices), sel.names, len(sel.cases))


def summary(report: ParityReport, devices: Sequence[int]) -> dict:
    """The run's summary record, with the counts per device (cases, failures, faults, not run) and the real
    weights' sources."""
    return {**report.run.summary(list(devices)), "per_device": [c.to_record() for c in report.counts],
            "fixtures": list(report.sources), "notes": list(report.notes)}


def record(result, rerun) -> dict:
    """A case's JSON record; a case that did not pass also holds the command that reruns it."""
    out = result.to_record()
    if rerun is not None and result.status.value != "PASS":
        out["rerun"] = rerun(result)
    return out
