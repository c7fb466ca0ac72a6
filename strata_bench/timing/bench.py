"""Bench: a fixed sequence of named steps per case, check -> warm-up -> trials -> summary.

- check: the variants run once at the timed shape and must agree bitwise (and write every element);
  a case that fails is reported and not timed.
- warm-up: a few graph replays (module load, clocks, TLB).
- trials: CUDA events around replays of a CUDA graph of many launches (timing/graph.py), so Python's
  launch cost is not timed; cold weights by rotating through copies of the inputs totalling >= 3x the L2.
  Trials repeat until the 95% CI of the median is within `rel_ci` or the case's time budget is spent
  (timing/trials.py).
- cold check: each copy replayed alone, right after the others and then again at once; a case whose
  first replays are not slower than the re-replays (where a copy fits in the L2) is flagged warm, and is
  not held to the roofline (timing/coldness.py).
- timed outputs checked: every copy's outputs were poisoned before the trials and must equal the
  check step's result (that variant's) bitwise after them; a median below bytes / read ceiling is impossible
  (timing/verify.py). Either sets the variant's status instead of "timed".
- summary: median, min, max us per call, GB/s of the bytes the kernel must move, the fraction of the one
  measured ceiling that bounds the family's kernels (Family.ceiling: read for a mat-vec, copy for a kernel
  that writes a real share of its bytes, none for a GEMM), TFLOP/s where the family counts flops.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from strata_bench.cases import Case, Family
from strata_bench.checks.parity import bitwise_target, compared_names, omitted_outputs
from strata_bench.kernels.ncu import ProfileRow
from strata_bench.timing.ceilings import Ceilings
from strata_bench.timing.clocks import ClockReader, ClockSummary
from strata_bench.timing.coldness import measure as measure_coldness
from strata_bench.timing.status import TIMED, BenchStatus, TimingStatus
from strata_bench.timing.coldness import WARM, ColdCheck
from strata_bench.timing.graph import GRAPH_TARGET_S, InputCopies, capture, launch_count, prepare_copies, replay_seconds
from strata_bench.timing.l2 import reset_persisting_l2
from strata_bench.timing.trials import run_trials
from strata_bench.timing.verify import (above_ceiling, poison_outputs, roofline_problem, sensitivity_text,
                                        timed_output_problem)

WARMUP_REPLAYS = 3
PARITY_FAILED = BenchStatus.PARITY_FAILED.value
CLOCK_EVERY = 10  # read the clocks after every 10th timed replay (and after the first and the last)


@dataclass(frozen=True)
class TimingConfig:
    """How bench times a variant: hot or cold inputs, the trials' stop rule, the graph's target length."""

    hot: bool = False
    rel_ci: float = 0.01
    budget_s: float = 2.0
    min_trials: int = 10
    max_trials: int = 400
    graph_target_s: float = GRAPH_TARGET_S  # aim each replay at this long so event resolution does not matter
    # bench --profile's child (runs/profile.py): run the check's one call of each variant up to this one and time
    # nothing, so the profiler sees exactly one call of it ("": time as usual)
    check_through: str = ""


@dataclass(frozen=True)
class Timing:
    """The summary of one variant of one case: its samples and what they mean against the ceilings."""

    case: Case
    variant: str
    samples_us: tuple[float, ...]  # per-call microseconds, one per replay
    launches_per_sample: int
    copies: int  # weight copies rotated through (1 = hot)
    bytes_moved: int
    flops: int
    ceilings: Ceilings
    status: TimingStatus = TIMED  # or why not (timing/status.py): a rejected one has samples that are not results
    ci_rel: float = math.nan
    clocks: ClockSummary | None = None  # NVML readings during the trials
    rotation: Mapping[str, Any] | None = None  # copies x bytes per copy against the L2 (InputCopies.rotation)
    l2_reset: str = ""  # the persisting-L2 reset before the trials: "reset" or why not
    sensitivity: float = math.nan  # the smallest relative change against the baseline its data could see
    cold_check: ColdCheck | None = None  # the rotation's coldness as measured (timing/coldness.py); None: --hot
    bound: str | None = "read"  # the ceiling that bounds the kernel (Family.ceiling); None: none does
    profile: ProfileRow | None = None  # bench --profile: what binds the row (runs/profile.py); None: not asked

    @property
    def flags(self) -> tuple[str, ...]:
        """What a reader must know beside the figures: warm rotation, throttling, a ceiling beaten."""
        flags = []
        if self.rotation and self.rotation.get("warning"):
            flags.append(self.rotation["warning"])
        if self.cold_check is not None and self.cold_check.flag():
            flags.append(self.cold_check.flag())
        if self.clocks is not None and self.clocks.throttled:
            flags.append(self.clocks.throttle_text())
        if self.samples_us and self.status.timed:
            beaten = above_ceiling(self.bytes_moved, self.median_us * 1e-6, self.ceilings, self.bound)
            if beaten:
                flags.append(beaten)
        return tuple(flags)

    @property
    def median_us(self) -> float:
        return float(np.median(self.samples_us)) if self.samples_us else math.nan

    def fraction(self, ceiling: str | None) -> float | None:
        """bytes per second over the named measured ceiling ("read", "copy"); None untimed or unnamed."""
        if not self.samples_us or ceiling is None:
            return None
        return self.bytes_moved / (self.median_us * 1e-6) / getattr(self.ceilings, f"{ceiling}_bps")

    @property
    def gbps(self) -> float:
        return self.bytes_moved / (self.median_us * 1e-6) / 1e9 if self.samples_us else math.nan

    def to_record(self) -> dict[str, Any]:
        """The JSON record bench writes per variant (results/<device>/bench-*.jsonl)."""
        s = np.asarray(self.samples_us) if self.samples_us else np.asarray([math.nan])
        med = self.median_us
        return {"case": self.case.name, "family": self.case.family, "format": self.case.fmt,
                "rows": self.case.rows, "cols": self.case.cols, "ncols": self.case.ncols,
                "data": self.case.data, "params": dict(self.case.params), "variant": self.variant,
                "status": str(self.status), "reason": self.status.reason, "median_us": med,
                "min_us": float(s.min()), "max_us": float(s.max()),
                "ci_rel": self.ci_rel, "trials": len(self.samples_us), "launches_per_sample": self.launches_per_sample,
                "copies": self.copies, "bytes": self.bytes_moved, "gbps": self.gbps,
                "frac_read": self.fraction("read"), "frac_copy": self.fraction("copy"),
                "bound": self.bound, "frac_bound": self.fraction(self.bound),
                "tflops": self.flops / (med * 1e-6) / 1e12 if self.flops and self.samples_us else None,
                "ceilings": _ceilings_record(self.ceilings),
                "clocks": None if self.clocks is None else self.clocks.to_dict(),
                "rotation": None if self.rotation is None else dict(self.rotation), "l2_reset": self.l2_reset,
                "cold_check": None if self.cold_check is None else self.cold_check.to_dict(),
                "sensitivity": None if math.isnan(self.sensitivity) else self.sensitivity,
                "flags": list(self.flags), "samples_us": list(self.samples_us),
                "profile": None if self.profile is None else self.profile.to_record()}


def _ceilings_record(ceilings: Ceilings) -> dict[str, Any]:
    """The ceilings a timing was judged by (None for a figure not measured)."""
    def known(x): return None if isinstance(x, float) and math.isnan(x) else x
    return {k: known(getattr(ceilings, k)) for k in ("read_bps", "write_bps", "copy_bps", "peak_bps", "source")}


# ---------------------------------------------------------------------------------------------------
# The steps

def check_variants_agree(family: Family, case: Case, kernels: Any, prep: InputCopies) -> str:
    """The check step: run each variant once at the timed shape; "" when they agree bitwise, else why not."""
    return check_variants(family, case, kernels, prep)[0]


def check_variants(family: Family, case: Case, kernels: Any, prep: InputCopies,
                   variants: Sequence[str] | None = None) -> tuple[str, dict[str, Mapping[str, Any]]]:
    """The check step, and the checked results: (why the variants disagree or "", each variant's outputs).
    Every copy's timed outputs of a variant must equal its checked outputs afterwards, every output bit
    for bit, also where the family compares no outputs between variants (timing/verify.py). `variants`: the
    case's first ones only (default all)."""
    import cupy

    variants = tuple(case.variants if variants is None else variants)
    results = {}
    for variant in variants:
        outs = family.alloc_outputs(case, prep.devs[0])
        for arr in outs.values():
            arr.view(cupy.uint8).fill(0xFF)
        family.launch(case, variant, kernels, prep.devs[0], outs)
        results[variant] = outs
    cupy.cuda.runtime.deviceSynchronize()
    for variant in variants[1:]:
        # Held to the baseline's bits, or another variant's (ggml_b to ggml's); one its error model judges
        # (a foreign engine's kernel) is not, and its timed outputs are still checked against its own.
        against = bitwise_target(family, case, variant, variants)
        if against is None:
            continue
        base, names = results[against], compared_names(family, case, variant, against)
        # An output either one does not compute (Variant.omits) stays poisoned there: not compared.
        skipped = {*omitted_outputs(family, variant), *omitted_outputs(family, against)}
        for name in (n for n in (base if names is None else names) if n not in skipped):
            a, b = base[name].view(cupy.uint8), results[variant][name].view(cupy.uint8)
            if not bool(cupy.array_equal(a, b)):
                return f"{PARITY_FAILED}: {variant} differs from {against} in {name}", results
    return "", results


def warm_up(graph, stream, replays: int = WARMUP_REPLAYS) -> None:
    """The warm-up step: replays that are not timed (module load, clocks, TLB)."""
    for _ in range(replays):
        replay_seconds(graph, stream)


def time_variant(family: Family, case: Case, variant: str, kernels: Any, prep: InputCopies,
                 ceilings: Ceilings, cfg: TimingConfig, checked: Mapping[str, Any],
                 clocks: ClockReader | None = None) -> Timing:
    """warm-up -> poison -> L2 reset -> trials (clocks read) -> timed outputs checked -> summary for one
    variant (the check step ran before and gave `checked`, this variant's outputs). A copy whose outputs
    differ from `checked` sets the status (timing/verify.py); the roofline is judged by `bench_case`."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    readings, replays = [], [0]

    def replay() -> float:
        seconds = replay_seconds(graph, stream)
        if clocks is not None and replays[0] % CLOCK_EVERY == 0:
            readings.append(clocks.read())  # outside the events: the replay is over
        replays[0] += 1
        return seconds

    with stream:
        launches = launch_count(family, case, variant, kernels, prep, stream, cfg.graph_target_s)
        graph = capture(family, case, variant, kernels, prep, launches, stream)
        warm_up(graph, stream)
        poison_outputs(prep)
        l2_reset = reset_persisting_l2()
        samples, ci_rel = run_trials(replay, launches, cfg)
    if clocks is not None:
        readings.append(clocks.read())
    status = timed_output_problem(family, case, variant, prep, checked, min(launches, len(prep.devs))) or TIMED
    return Timing(case, variant, tuple(samples), launches, len(prep.devs), family.bytes_moved(case),
                  family.flops(case), ceilings, status=status, ci_rel=ci_rel,
                  clocks=None if clocks is None else clocks.summary(readings), bound=family.ceiling,
                  rotation=prep.rotation(cfg.hot), l2_reset=l2_reset)


def fastest(timings: list[Timing]) -> str:
    """The variant with the least median: the cold check replays it, as the one whose time depends most on
    where its bytes come from (a compute-bound baseline, fp16deq's old at 6% of copy, is as fast from the
    L2 as from DRAM and would read as warm)."""
    timed = [t for t in timings if t.samples_us] or timings
    return min(timed, key=lambda t: t.median_us if t.samples_us else math.inf).variant


def judge_roofline(timing: Timing, cold: bool) -> Timing:
    """A timed, cold variant whose median beats the roofline gets the "impossible: ..." status."""
    if not timing.status.timed or not cold or not timing.samples_us:
        return timing
    problem = roofline_problem(timing.variant, timing.median_us * 1e-6, timing.bytes_moved, timing.ceilings)
    return replace(timing, status=problem) if problem else timing


def with_sensitivity(timings: list[Timing]) -> list[Timing]:
    """Each variant's smallest detectable change against the baseline (the first variant): the two
    medians' 95% CI half-widths combined, sqrt(a^2 + b^2); the baseline's is that of the first other."""
    if not timings:
        return timings
    base = timings[0].ci_rel
    mine = [math.hypot(base, t.ci_rel) for t in timings[1:]]
    first = mine[0] if mine else base
    return [replace(t, sensitivity=s) for t, s in zip(timings, [first] + mine)]


def bench_case(family: Family, case: Case, kernels: Any, device: int, cfg: TimingConfig,
               ceilings: Ceilings, remeasure: Callable[[], Ceilings] | None = None,
               clocks: ClockReader | None = None) -> list[Timing]:
    """The named steps for one case: check, then warm-up + trials + summary per variant. A variant
    faster than a ceiling makes `remeasure` (once per device, timing/ceilings.py) give the ceilings
    the variants are judged by; a variant still above them is flagged (and "impossible" beyond the
    slack, timing/verify.py). `clocks` defaults to an NVML reader of `device`."""
    import cupy

    l2 = cupy.cuda.runtime.getDeviceProperties(device)["l2CacheSize"]
    host = family.make_inputs(case)
    prep = prepare_copies(family, case, host, cfg.hot, l2)
    if cfg.check_through:
        return checked_only(family, case, kernels, prep, cfg, ceilings)
    problem, checked = check_variants(family, case, kernels, prep)
    if problem:
        return [Timing(case, v, (), 0, len(prep.devs), family.bytes_moved(case), family.flops(case), ceilings,
                       status=TimingStatus(BenchStatus.PARITY_FAILED, problem.removeprefix(f"{PARITY_FAILED}: ")),
                       rotation=prep.rotation(cfg.hot), bound=family.ceiling) for v in case.variants]
    clocks = clocks if clocks is not None else ClockReader(device)
    timings = [time_variant(family, case, v, kernels, prep, ceilings, cfg, checked[v], clocks)
               for v in case.variants]
    if not cfg.hot:
        check = measure_coldness(family, case, fastest(timings), kernels, prep, cupy.cuda.Stream(non_blocking=True))
        timings = [replace(t, cold_check=check) for t in timings]
    beaten = any(t.status.timed and t.samples_us and above_ceiling(t.bytes_moved, t.median_us * 1e-6, ceilings,
                                                                            t.bound)
                 for t in timings)
    if beaten and remeasure is not None:
        ceilings = remeasure()
        timings = [replace(t, ceilings=ceilings) for t in timings]
    cold = prep.cold and (timings[0].cold_check is None or timings[0].cold_check.verdict != WARM)
    return with_sensitivity([judge_roofline(t, cold) for t in timings])


def checked_only(family: Family, case: Case, kernels: Any, prep: InputCopies, cfg: TimingConfig,
                 ceilings: Ceilings) -> list[Timing]:
    """bench --profile's child: the check's one call of each variant through cfg.check_through, none timed (a row
    each, status CHECKED, or PARITY_FAILED where they disagree)."""
    through = case.variants[:case.variants.index(cfg.check_through) + 1]
    problem, _ = check_variants(family, case, kernels, prep, through)
    status = (TimingStatus(BenchStatus.PARITY_FAILED, problem.removeprefix(f"{PARITY_FAILED}: ")) if problem
              else TimingStatus(BenchStatus.CHECKED, "one call each for bench --profile, not timed"))
    return [Timing(case, v, (), 0, len(prep.devs), family.bytes_moved(case), family.flops(case), ceilings,
                   status=status, rotation=prep.rotation(cfg.hot), bound=family.ceiling) for v in through]


def sensitivity_line(timings: list[Timing]) -> str:
    """'could see >= 0.4% (40 + 38 trials)' for a case's timings ('' when not timed)."""
    timed = [t for t in timings if t.samples_us]
    if not timed:
        return ""
    return sensitivity_text(timed[-1].sensitivity, [len(t.samples_us) for t in timed])
