"""Kernel A/B: two variants of the same case timed in one process, run by run in ABBA (or AB, random) order.

Each arm replays a CUDA graph of the variant's launches (the same graph every run, built once, cold
weights by rotation as in bench) and reports microseconds per call. The two graphs share inputs, so a
pair differs only in the variant. A variant may carry a work factor, `new*1.03`: its graph holds 3%
more launches than the other arm's while its time is still divided by the same count; this is the planted
slowdown that shows whether a comparison can see 3%.

Timed outputs checked (timing/verify.py): each arm writes its own outputs, poisoned after the warm-up;
after the schedule every copy's must equal the check step's result bitwise, and neither arm's median may
beat the roofline. Otherwise the case is rejected: a "rejected" record, verdict UNDECIDED, exit 1.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from strata_bench.ab.arms import Arm
from strata_bench.ab.plan import Plan
from strata_bench.ab.records import AbOutcome, AbReport
from strata_bench.ab.runner import case_progress, reject, run_ab
from strata_bench.ab.store import finish, finish_partial
from strata_bench.cases import Case
from strata_bench.cases.spec import RunSpec
from strata_bench.errors import InputError
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.graph import InputCopies

_VARIANT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+?)(?:\*(?P<factor>[0-9.]+))?$")


def parse_variant(spec: str) -> tuple[str, float]:
    """'new' -> ('new', 1.0); 'new*1.03' -> ('new', 1.03)."""
    m = _VARIANT.match(spec)
    if not m:
        raise InputError(f"bad variant {spec!r}: expected NAME or NAME*FACTOR (e.g. new*1.03)")
    factor = float(m.group("factor") or 1.0)
    if not 0.5 <= factor <= 4:
        raise InputError(f"work factor in {spec!r} must be between 0.5 and 4")
    return m.group("name"), factor


def check_variant_names(cases, *specs: str) -> None:
    """Every spec names a variant of every case (work factors allowed): else InputError listing the known names."""
    for spec in specs:
        name, _ = parse_variant(spec)
        for case in cases:
            if name not in case.variants:
                raise InputError(f"variant {name!r} is not one of {case.name}'s: {', '.join(case.variants)}")


class _GraphArm:
    """One variant's graph on one case; calling it replays once and returns us per call."""

    def __init__(self, family, case: Case, variant: str, factor: float, kernels, prep, launches: int, stream,
                 clocks=None):
        from strata_bench.timing.graph import capture

        self.variant = variant
        self.clocks = clocks  # a ClockReader (timing/clocks.py): read before and after each replay
        self.launches = launches
        self.stream = stream
        # The extra launches are not rounded up to whole rotations of the input copies: that rounding
        # once turned a planted 3% into 10% (143 launches over 11 copies -> 154).
        total = max(1, round(launches * factor))
        self.total = total
        self.factor = total / launches
        with stream:
            self.graph = capture(family, case, variant, kernels, prep, total, stream)

    def __call__(self):
        from strata_bench.ab.arms import Sample
        from strata_bench.timing.graph import replay_seconds

        if self.clocks is None:
            return replay_seconds(self.graph, self.stream) / self.launches * 1e6
        before = self.clocks.read()  # host-side, outside the replay's events
        value = replay_seconds(self.graph, self.stream) / self.launches * 1e6
        summary = self.clocks.summary([before, self.clocks.read()])
        return Sample(value, {"clocks": summary.to_dict()})


@dataclass(frozen=True)
class KernelArms:
    """Both arms of one case, and what checks their timed outputs after the schedule: each arm has its own
    outputs per input copy (the inputs are shared), poisoned after the warm-up replays."""

    family: Any
    case: Case
    arm_a: Arm
    arm_b: Arm
    graphs: tuple[tuple[str, "_GraphArm", InputCopies], ...]  # (variant spec, arm, its copies) for A, B
    checked: Mapping[str, Mapping[str, Any]]  # variant name -> its outputs in the check step
    ceilings: Ceilings
    l2_reset: str = ""  # the persisting-L2 reset before the schedule: "reset" or why not

    def problem(self, outcome: AbOutcome) -> str:
        """"" when both arms' timed outputs equal the checked result and neither beats the roofline."""
        from statistics import median

        from strata_bench.timing.verify import roofline_problem, timed_output_problem

        for label, (spec, arm, prep) in zip("AB", self.graphs):
            problem = timed_output_problem(self.family, self.case, spec, prep, self.checked[arm.variant],
                                           min(arm.total, len(prep.devs)))
            if problem:
                return str(problem)
        for label, (spec, arm, prep) in zip("AB", self.graphs):
            values = [r.value for r in outcome.runs if r.arm == label and r.ok and not r.warmup]
            if values and prep.cold:
                problem = roofline_problem(spec, median(values) * 1e-6, self.family.bytes_moved(self.case),
                                           self.ceilings)
                if problem:
                    return str(problem)
        return ""


def build_arms(family, case: Case, spec_a: str, spec_b: str, kernels, l2_bytes: int,
               ceilings: Ceilings, clocks=None) -> KernelArms:
    """Check the two variants at the timed shape, size and capture one graph per arm, warm up, poison
    every output of every copy. The cupy calls are the only device dependency (tests pass a stand-in)."""
    import cupy

    from strata_bench.timing.bench import check_variants
    from strata_bench.timing.graph import launch_count, prepare_copies
    from strata_bench.timing.l2 import reset_persisting_l2
    from strata_bench.timing.verify import poison_outputs

    (name_a, fa), (name_b, fb) = parse_variant(spec_a), parse_variant(spec_b)
    check_variant_names([case], spec_a, spec_b)
    prep = prepare_copies(family, case, family.make_inputs(case), hot=False, l2_bytes=l2_bytes)
    problem, checked = check_variants(family, replace(case, variants=tuple(dict.fromkeys((name_a, name_b)))),
                                      kernels, prep)
    if problem:
        raise InputError(f"{case.name}: {problem}; fix parity before timing")
    # Arm B reads the same input copies but writes its own outputs, so each arm's are checked alone.
    prep_b = InputCopies(prep.devs, [family.alloc_outputs(case, d) for d in prep.devs], prep.input_bytes, prep.cold,
                         prep.l2_bytes)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        # At least 200 launches a run, so a work factor is rounded to within 0.25%.
        launches = launch_count(family, case, name_a, kernels, prep, stream, floor=200)
    arm_a = _GraphArm(family, case, name_a, fa, kernels, prep, launches, stream, clocks)
    arm_b = _GraphArm(family, case, name_b, fb, kernels, prep_b, launches, stream, clocks)
    for arm in (arm_a, arm_b, arm_a, arm_b):
        arm()  # warm-up replays outside the schedule (the plan's warm-up pairs come on top)
    with stream:
        poison_outputs(prep)
        poison_outputs(prep_b)
        l2_reset = reset_persisting_l2()
    describe = {"case": case.name, "launches_per_run": launches, "weight_copies": len(prep.devs),
                "rotation_l2_multiple": prep.rotation()["l2_multiple"]}
    return KernelArms(family, case,
                      Arm("A", arm_a, {**describe, "variant": spec_a, "work_factor": arm_a.factor}),
                      Arm("B", arm_b, {**describe, "variant": spec_b, "work_factor": arm_b.factor}),
                      ((spec_a, arm_a, prep), (spec_b, arm_b, prep_b)), checked, ceilings, l2_reset)


def _arms_for_case(family, case: Case, spec_a: str, spec_b: str, device: int) -> KernelArms:
    import cupy

    from strata_bench.kernels.build import load_kernels
    from strata_bench.timing.ceilings import measure_ceilings

    parse_variant(spec_a), parse_variant(spec_b)
    kernels = load_kernels(family, device)
    l2 = cupy.cuda.runtime.getDeviceProperties(device)["l2CacheSize"]
    from strata_bench.timing.clocks import ClockReader

    return build_arms(family, case, spec_a, spec_b, kernels, l2, measure_ceilings(device), ClockReader(device))


def throttled_pairs(outcome: AbOutcome) -> dict[int, tuple[str, ...]]:
    """Measured pairs with a run whose clocks were held down: pair -> the reasons (and grown counters)."""
    from strata_bench.timing.clocks import ClockSummary

    found: dict[int, tuple[str, ...]] = {}
    for r in outcome.runs:
        clocks = r.details.get("clocks") if not r.warmup else None
        if clocks:
            summary = ClockSummary.from_dict(clocks)
            if summary.throttled:
                why = summary.throttle_text().removeprefix("throttled: ").split(", ")
                found[r.pair] = tuple(dict.fromkeys(found.get(r.pair, ()) + tuple(why)))
    return found


def sensitivity(outcome: AbOutcome) -> str:
    """'could see >= 0.4% (12 pairs)': the half-width of the interval the verdict reads (the paired
    shift's, else the mean-based one), i.e. the smallest change this many pairs could have detected."""
    paired = outcome.comparison.paired
    if paired is None:
        return "sensitivity unknown (no complete pairs)"
    ci = paired.shift_ci or paired.rel_ci
    if ci is None:
        return f"sensitivity unknown ({paired.n} pairs, too few for an interval)"
    return f"could see >= {100 * ci.half_width:.1f}% ({paired.n} pairs)"


def timing_flags(outcome: AbOutcome) -> tuple[str, ...]:
    """The notes kernel A/B adds: the sensitivity, then the pairs measured while throttled."""
    flags = [sensitivity(outcome)]
    throttled = throttled_pairs(outcome)
    if throttled:
        reasons = sorted({w for why in throttled.values() for w in why})
        flags.append(f"throttled: pairs {', '.join(map(str, sorted(throttled)))} measured while the clocks "
                     f"were held down ({', '.join(reasons)})")
    return tuple(flags)


def run_case(arms: KernelArms, plan: Plan, writer, on_run=None) -> AbOutcome:
    """The plan's schedule over both arms, then their timed outputs checked: a problem is recorded
    (a "rejected" record) and rejects the outcome (verdict UNDECIDED, exit 1). The sensitivity and
    any pair measured while throttled are added to the notes and recorded (a "timing" record)."""
    outcome = run_ab(arms.arm_a, arms.arm_b, plan, writer, arms.case.name, on_run)
    warm = arms.graphs[0][2].rotation()["warning"]
    outcome = replace(outcome, flags=timing_flags(outcome) + ((warm,) if warm else ()))
    if writer is not None:
        writer.append({"record": "timing", "case": arms.case.name, "notes": list(outcome.flags),
                       "throttled_pairs": sorted(throttled_pairs(outcome)),
                       "rotation": arms.graphs[0][2].rotation(), "l2_reset": arms.l2_reset})
    problem = arms.problem(outcome)
    if problem:
        if writer is not None:
            writer.append({"record": "rejected", "case": arms.case.name, "reason": problem})
        outcome = reject(outcome, problem)
    return outcome


def run_kernel_ab(spec: RunSpec, variant_a: str, variant_b: str, plan: Plan, results_dir: Path,
                  progress=None, device: int = 0) -> AbReport:
    """A/B of two kernel variants on every selected case; records under results/<device>/ab-*.jsonl;
    `progress` is the command's display (ab/runner.Progress), None for none.
    The variant names are checked against the cases before a device is sought (a typo is a usage error,
    not "no GPU"), and CuPy is imported only once a device was found (none: NoGpu, exit 77)."""
    from strata_bench.gpu import devices as gpu
    from strata_bench.runs import Selection
    from strata_bench.runs.prepare import prepare

    prepared = prepare(spec)
    catalog, cases = prepared.catalog, list(dict.fromkeys(prepared.cases))
    check_variant_names(cases, variant_a, variant_b)
    devices = gpu.select_devices(str(device))
    import cupy

    # Each arm returns microseconds per call (_GraphArm): the plan says so, or every figure is shown
    # converted from seconds (the command plan's wall time), 10^6 too large.
    plan = replace(plan, unit="us", value_unit="us", metric="kernel us per call")
    # One selection as parity's and bench's: the same provenance (the run's declaration, its families' closures).
    selection = Selection(catalog, cases, devices, {d: gpu.device_name(d) for d in devices}, results_dir, spec)
    writer = selection.results_writer("ab", extra={"ab": {"A": variant_a, "B": variant_b, "order": plan.order,
                                                          "seed": plan.seed}})
    outcomes = []
    try:
        with cupy.cuda.Device(devices[0]):
            for case in cases:
                arms = _arms_for_case(catalog[case.family], case, variant_a, variant_b, devices[0])
                with case_progress(plan.total_runs, case.name, progress) as on_run:
                    outcomes.append(run_case(arms, plan, writer, on_run))
    except BaseException:
        finish_partial(writer)
        raise
    summary = finish(writer, outcomes)
    return AbReport(tuple(outcomes), summary, writer.records_path)
