"""run_bench: every selected case timed on every device (timing/bench.py's named steps through the
the device loop (gpu/loop.py)), against that device's own ceilings, measured in its context before its first case
and re-measured when a variant beats them; each timing appended to the results file as it arrives, the
summary written even when a device faults or the run is interrupted."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strata_bench.cases import Case
from strata_bench.errors import InputError
from strata_bench.gpu import loop
from strata_bench.runs import Progress, Selection
from strata_bench.runs import profile as profiler  # through the module: tests stand in
from strata_bench.timing import bench as steps, ceilings as card  # called through the modules: tests stand in
from strata_bench.timing.bench import Timing, TimingConfig
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.status import BenchStatus, TimingStatus



@dataclass(frozen=True)
class BenchPlan:
    """What a bench run times, how, and where it keeps the records."""

    selection: Selection
    config: TimingConfig = TimingConfig()
    profile: bool = False  # after timing, each timed row's profile under ncu (runs/profile.py)


@dataclass
class BenchReport:
    """What a finished (or interrupted) run hands back to be rendered."""

    timings: list[tuple[int, Timing]] = field(default_factory=list)  # (device, timing) in arrival order
    ceilings: dict[int, Ceilings] = field(default_factory=dict)  # each device reached, as last measured
    per_device: list[dict] = field(default_factory=list)
    summary_path: Path | None = None
    provenance: dict = field(default_factory=dict)

    def records(self) -> list[dict[str, Any]]:
        return [{**t.to_record(), "device": d} for d, t in self.timings]


def run_bench(plan: BenchPlan, progress: Progress | None = None) -> BenchReport:
    """Time every case of `plan` on each of its devices."""
    sel = plan.selection
    writer = sel.results_writer("bench", timing=vars(plan.config))
    report = BenchReport(provenance=writer.provenance)

    def per_case(family, case, kernels, device):
        report.ceilings[device] = card.measure_ceilings(device)
        return device, steps.bench_case(family, case, kernels, device, plan.config, report.ceilings[device],
                                        remeasure=lambda: card.remeasure_ceilings(device))

    written = 0  # report.timings[:written] are in the results file

    def write_new() -> None:
        nonlocal written
        for device, timing in report.timings[written:]:
            writer.append({**timing.to_record(), "device": device})
        written = len(report.timings)

    def keep(result) -> None:
        device, case_timings = result
        report.timings.extend((device, timing) for timing in case_timings)
        if not plan.profile:  # a profiled row is written once its profile is known, after every timing
            write_new()

    def on_fault(case, device, exc, seconds):
        # The device's context is gone: its remaining cases are skipped, the other devices still run.
        return device, fault_timings(case, exc)

    with sel.progress_bar(progress, "bench") as advance:
        refused = False
        try:
            loop.run_on_devices(list(sel.cases), list(sel.devices), sel.catalog, per_case, keep, on_fault, advance)
            if plan.profile:
                report.timings = profiler.profile_timings(sel.spec, sel.catalog, report.timings)
        except InputError:
            refused = not report.timings  # e.g. a variant's kernels not built: before any case ran
            raise
        finally:
            if refused:
                writer.discard()  # bad input leaves nothing written
            else:
                write_new()  # an interrupted profile still keeps every timing, without its profile
                _finish(plan, report, writer)
    return report


def _finish(plan: BenchPlan, report: BenchReport, writer: Any) -> None:
    """The summary record, however the loop ended (a device fault and an interrupt included)."""
    # Each device reached has its ceilings in this process (re-measured ones included), so
    # measure_ceilings only reads them back here; a device never reached has none.
    report.ceilings = {d: card.measure_ceilings(d) for d in report.ceilings}
    report.per_device = per_device(plan, report)
    report.summary_path = writer.finish(
        {"timings": len(report.timings), "hot": plan.config.hot, "per_device": report.per_device,
         "ceilings": {str(d): c.to_dict() for d, c in report.ceilings.items()}},
        sum(not t.status.timed for _, t in report.timings))


def fault_timings(case: Case, exc: BaseException) -> list[Timing]:
    """A row per variant of a case whose kernel faulted: no samples, the fault as its status."""
    status = TimingStatus(BenchStatus.KERNEL_FAULT, str(exc))
    return [Timing(case, v, (), 0, 0, 0, 0, Ceilings(math.nan, math.nan), status=status) for v in case.variants]


def per_device(plan: BenchPlan, report: BenchReport) -> list[dict]:
    """Each device's share of the run: its name, timings, rows not timed, fault, and its own ceilings."""
    out = []
    for d in plan.selection.devices:
        mine = [t for dev, t in report.timings if dev == d]
        fault = next((str(t.status) for t in mine if t.status.kind is BenchStatus.KERNEL_FAULT), None)
        out.append({"device": d, "name": plan.selection.names[d], "timings": len(mine),
                    "not_timed": sum(not t.status.timed for t in mine), "fault": fault,
                    "ceilings": report.ceilings[d].to_dict() if d in report.ceilings else None})
    return out
