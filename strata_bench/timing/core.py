"""Timing: a fixed sequence of named steps per case, check -> warm-up -> trials -> summary.

- check: the variants run once at the timed shape and must agree bitwise (and write every element);
  a case that fails is reported and not timed.
- warm-up: a few graph replays (module load, clocks, TLB).
- trials: CUDA events around replays of a CUDA graph of many launches, so Python's ~5-10 us launch cost
  is not timed; cold weights by rotating through copies of the inputs whose total is >= 3x the L2.
  Trials repeat until the 95% CI of the median is within `rel_ci` or the case's time budget is spent.
- summary: median, min, max us per call, GB/s of the bytes the kernel must move, fractions of the
  device's measured read and copy ceilings, TFLOP/s where the family counts flops.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from strata_bench.cases import Case, Family

L2_ROTATION_FACTOR = 3  # rotate through inputs of at least this many L2s (nvbench-style cold cache)


@dataclass(frozen=True)
class Ceilings:
    """The device's own measured bandwidth, bytes per second."""

    read_bps: float  # read-only streaming
    copy_bps: float  # device-to-device copy, bytes read + written


@dataclass(frozen=True)
class TimingConfig:
    hot: bool = False
    rel_ci: float = 0.01
    budget_s: float = 2.0
    min_trials: int = 10
    max_trials: int = 400
    graph_target_s: float = 2e-3  # aim each replay at this long so event resolution does not matter


@dataclass(frozen=True)
class Timing:
    case: Case
    variant: str
    samples_us: tuple[float, ...]  # per-call microseconds, one per replay
    launches_per_sample: int
    copies: int  # weight copies rotated through (1 = hot)
    bytes_moved: int
    flops: int
    ceilings: Ceilings
    status: str = "timed"  # "timed", or why not ("parity failed: ...")
    ci_rel: float = math.nan

    @property
    def median_us(self) -> float:
        return float(np.median(self.samples_us)) if self.samples_us else math.nan

    @property
    def gbps(self) -> float:
        return self.bytes_moved / (self.median_us * 1e-6) / 1e9 if self.samples_us else math.nan

    def to_record(self) -> dict[str, Any]:
        s = np.asarray(self.samples_us) if self.samples_us else np.asarray([math.nan])
        med = self.median_us
        return {"case": self.case.name, "family": self.case.family, "format": self.case.fmt,
                "rows": self.case.rows, "cols": self.case.cols, "ncols": self.case.ncols,
                "data": self.case.data, "params": dict(self.case.params), "variant": self.variant,
                "status": self.status, "median_us": med, "min_us": float(s.min()), "max_us": float(s.max()),
                "ci_rel": self.ci_rel, "trials": len(self.samples_us), "launches_per_sample": self.launches_per_sample,
                "copies": self.copies, "bytes": self.bytes_moved, "gbps": self.gbps,
                "frac_read": self.bytes_moved / (med * 1e-6) / self.ceilings.read_bps if self.samples_us else None,
                "frac_copy": self.bytes_moved / (med * 1e-6) / self.ceilings.copy_bps if self.samples_us else None,
                "tflops": self.flops / (med * 1e-6) / 1e12 if self.flops and self.samples_us else None,
                "samples_us": list(self.samples_us)}


def median_ci(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (binomial), as a (low, high) pair."""
    from scipy.stats import binom

    n = len(samples)
    x = np.sort(samples)
    if n < 6:
        return float(x[0]), float(x[-1])
    lo = int(binom.ppf((1 - confidence) / 2, n, 0.5))
    hi = int(binom.isf((1 - confidence) / 2, n, 0.5))
    return float(x[max(lo - 1, 0)]), float(x[min(hi, n - 1)])


# ---------------------------------------------------------------------------------------------------
# Ceilings

_READ_KERNEL = r"""
extern "C" __global__ void strata_read_ceiling(const int4* __restrict__ src, long long n, int* out) {
    int acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        int4 v = __ldcs(src + i);  // streaming load: do not keep in L2
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) out[0] = acc;  // keeps the loads alive; never true for the fill used
}
"""

_CEILINGS: dict[int, Ceilings] = {}


def measure_ceilings(device: int, nbytes: int = 2 << 30) -> Ceilings:
    """Read-only and copy bandwidth of this device, measured once per process (median of 20)."""
    if device in _CEILINGS:
        return _CEILINGS[device]
    import cupy

    src = cupy.full(nbytes // 4, 0x01020304, dtype=cupy.int32)
    dst = cupy.empty_like(src)
    sink = cupy.zeros(1, dtype=cupy.int32)
    kernel = cupy.RawKernel(_READ_KERNEL, "strata_read_ceiling")
    sms = cupy.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"]
    n16 = np.int64(nbytes // 16)
    read_s = _median_seconds(lambda: kernel((sms * 8,), (512,), (src, n16, sink)))
    copy_s = _median_seconds(lambda: dst.__setitem__(Ellipsis, src))
    _CEILINGS[device] = Ceilings(read_bps=nbytes / read_s, copy_bps=2 * nbytes / copy_s)
    del src, dst
    return _CEILINGS[device]


def _median_seconds(fn, reps: int = 20) -> float:
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    fn()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return float(np.median(times))


# ---------------------------------------------------------------------------------------------------
# One case

@dataclass
class _Prepared:
    devs: list[Mapping[str, Any]]
    outs: list[Mapping[str, Any]]
    input_bytes: int


def _nbytes(arrays: Mapping[str, Any]) -> int:
    return sum(int(getattr(a, "nbytes", 0)) for a in arrays.values())


def prepare_copies(family: Family, case: Case, host: Mapping[str, Any], hot: bool, l2_bytes: int) -> _Prepared:
    """Device copies of the inputs: one when hot, else enough to cover L2_ROTATION_FACTOR x L2."""
    first = family.to_device(case, host)
    per_copy = max(_nbytes(first), 1)
    copies = 1 if hot else max(1, math.ceil(L2_ROTATION_FACTOR * l2_bytes / per_copy))
    copies = min(copies, 64)
    devs = [first] + [family.to_device(case, host) for _ in range(copies - 1)]
    outs = [family.alloc_outputs(case, d) for d in devs]
    return _Prepared(devs, outs, per_copy)


def check_variants_agree(family: Family, case: Case, kernels: Any, prep: _Prepared) -> str:
    """Run each variant once at the timed shape; "" when they agree bitwise, else why not."""
    import cupy

    results = {}
    for variant in case.variants:
        outs = family.alloc_outputs(case, prep.devs[0])
        for arr in outs.values():
            arr.view(cupy.uint8).fill(0xFF)
        family.launch(case, variant, kernels, prep.devs[0], outs)
        results[variant] = outs
    cupy.cuda.runtime.deviceSynchronize()
    names = family.compared_outputs(case)
    base = results[case.baseline]
    for variant in case.variants[1:]:
        for name in (base if names is None else names):
            a, b = base[name].view(cupy.uint8), results[variant][name].view(cupy.uint8)
            if not bool(cupy.array_equal(a, b)):
                return f"parity failed: {variant} differs from {case.baseline} in {name}"
    return ""


def _capture(family: Family, case: Case, variant: str, kernels: Any, prep: _Prepared, launches: int, stream):
    stream.begin_capture()
    for i in range(launches):
        k = i % len(prep.devs)
        family.launch(case, variant, kernels, prep.devs[k], prep.outs[k], stream=stream)
    return stream.end_capture()


def time_variant(family: Family, case: Case, variant: str, kernels: Any, prep: _Prepared,
                 ceilings: Ceilings, cfg: TimingConfig) -> Timing:
    """warm-up -> trials -> summary for one variant (the check step ran before)."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        # Size the graph: time one launch per copy, then take enough launches to fill graph_target_s.
        probe_graph = _capture(family, case, variant, kernels, prep, len(prep.devs), stream)
        one = _replay_seconds(probe_graph, stream) / len(prep.devs)
        launches = max(len(prep.devs), min(2000, int(cfg.graph_target_s / max(one, 1e-7))))
        launches = math.ceil(launches / len(prep.devs)) * len(prep.devs)
        graph = _capture(family, case, variant, kernels, prep, launches, stream)
        for _ in range(3):
            _replay_seconds(graph, stream)
        samples, ci_rel = _trials(graph, stream, launches, cfg)
    return Timing(case, variant, tuple(samples), launches, len(prep.devs), family.bytes_moved(case),
                  family.flops(case), ceilings, ci_rel=ci_rel)


def _replay_seconds(graph, stream) -> float:
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record(stream)
    graph.launch(stream)
    stop.record(stream)
    stop.synchronize()
    return cupy.cuda.get_elapsed_time(start, stop) / 1e3


def _trials(graph, stream, launches: int, cfg: TimingConfig) -> tuple[list[float], float]:
    samples: list[float] = []
    deadline = time.perf_counter() + cfg.budget_s
    ci_rel = math.nan
    while len(samples) < cfg.max_trials:
        samples.append(_replay_seconds(graph, stream) / launches * 1e6)
        if len(samples) >= cfg.min_trials:
            lo, hi = median_ci(np.asarray(samples))
            ci_rel = (hi - lo) / 2 / float(np.median(samples))
            if ci_rel <= cfg.rel_ci or time.perf_counter() > deadline:
                break
    return samples, ci_rel


def bench_case(family: Family, case: Case, kernels: Any, device: int, cfg: TimingConfig,
               ceilings: Ceilings) -> list[Timing]:
    """The named steps for one case: check, then warm-up + trials + summary per variant."""
    import cupy

    l2 = cupy.cuda.runtime.getDeviceProperties(device)["l2CacheSize"]
    host = family.make_inputs(case)
    prep = prepare_copies(family, case, host, cfg.hot, l2)
    problem = check_variants_agree(family, case, kernels, prep)
    if problem:
        return [Timing(case, v, (), 0, len(prep.devs), family.bytes_moved(case), family.flops(case), ceilings,
                       status=problem) for v in case.variants]
    return [time_variant(family, case, v, kernels, prep, ceilings, cfg) for v in case.variants]


def sweep(case: Case, shape: tuple[int, int] | None, cols: tuple[int, ...] | None) -> list[Case]:
    """The bench sweep of one case: its shape replaced by --shape, its column count by each of --cols."""
    base = replace(case, rows=shape[0], cols=shape[1]) if shape else case
    return [replace(base, ncols=n) for n in cols] if cols else [base]
