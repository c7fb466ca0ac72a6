"""The device's own bandwidth ceilings (streaming read, write, device-to-device copy), so bench can report
each kernel's GB/s as a fraction of what this card actually reaches, beside the theoretical peak.

A ceiling is the best of a small sweep of tuned kernels (16-byte loads and stores, 1, 2 or 4 of them in
flight per thread, three grid sizes; the copy also tries cudaMemcpy) over at least 8 GiB where the card has
the memory. One kernel that is a few percent off (the first version read 4.41 TB/s where a 4x-unrolled
kernel reaches 4.64 on an H200) makes every kernel look better than it is, so the sweep keeps the best.
The sweep takes well under a second on an H200 (each pass over 8 GiB is about 2 ms); its result is cached
per device and driver in ceilings.json under $STRATA_CACHE_DIR (default ~/.cache/strata-bench), and
re-measured (`remeasure_ceilings`) when a kernel beats it.

The theoretical peak is 2 (DDR) x memory clock x bus width, from NVML or the device properties.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

GiB = 1 << 30
SWEEP_BYTES = 8 * GiB
UNROLLS = (1, 2, 4)  # 16-byte accesses in flight per thread
GRID_PER_SM = (2, 4, 8)  # blocks of BLOCK threads per SM
BLOCK = 512
REPS = 5  # timed passes per configuration; the configuration's time is their median
CACHE_NAME = "ceilings.json"
CACHE_SCHEMA = 1


@dataclass(frozen=True)
class Ceilings:
    """The device's measured bandwidth, bytes per second (copy counts bytes read + written), and the
    theoretical peak (nan when the clocks or bus width could not be read)."""

    read_bps: float
    copy_bps: float
    write_bps: float = math.nan
    peak_bps: float = math.nan
    nbytes: int = 0  # bytes each sweep pass covered
    best: tuple[str, ...] = ()  # the winning configuration of each kind, e.g. "read: 16B x4, 1056 blocks"
    spread: float = math.nan  # largest (max - min) / median of a winning configuration's passes
    source: str = ""  # "measured", "cached <utc>", "re-measured"
    key: str = ""  # the device and driver the cache entry belongs to

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> "Ceilings":
        known = {f for f in cls.__dataclass_fields__}
        values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in body.items() if k in known}
        return cls(**values)

    def text(self) -> str:
        """One line for a table footer."""
        def tb(x): return "-" if not math.isfinite(x) else f"{x / 1e12:.2f}"
        peak = f", theoretical peak {tb(self.peak_bps)} TB/s" if math.isfinite(self.peak_bps) else ""
        size = f" over {self.nbytes / GiB:.0f} GiB" if self.nbytes else ""
        return (f"ceilings: read {tb(self.read_bps)}, write {tb(self.write_bps)}, copy {tb(self.copy_bps)} "
                f"TB/s{peak} (best of a kernel sweep{size}; {self.source or 'given'})")


def theoretical_peak_bps(memory_clock_mhz: float | None, bus_width_bits: int | None) -> float:
    """2 transfers per memory clock x bus width: 2 x 3201 MHz x 6016 bit = 4.81 TB/s on an H200."""
    if not memory_clock_mhz or not bus_width_bits:
        return math.nan
    return 2 * memory_clock_mhz * 1e6 * bus_width_bits / 8


# ---------------------------------------------------------------------------------------------------
# Cache: one entry per device and driver

def cache_path() -> Path:
    root = os.environ.get("STRATA_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "strata-bench") / CACHE_NAME


def load_cached(key: str, path: Path | None = None) -> Ceilings | None:
    """The cached ceilings for `key`, or None (no file, no entry, an unreadable or older file)."""
    path = path or cache_path()
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    entry = body.get("entries", {}).get(key) if body.get("schema") == CACHE_SCHEMA else None
    if not isinstance(entry, dict):
        return None
    try:
        ceilings = Ceilings.from_dict(entry)
    except TypeError:
        return None
    return replace(ceilings, source=f"cached {entry.get('measured_utc', '?')}")


def store_cached(key: str, ceilings: Ceilings, path: Path | None = None) -> None:
    """Add or replace `key`'s entry (written to a temporary file, then renamed: no half-written cache)."""
    path = path or cache_path()
    try:
        body = json.loads(path.read_text())
        if body.get("schema") != CACHE_SCHEMA:
            body = {}
    except (OSError, ValueError):
        body = {}
    entries = dict(body.get("entries") or {})
    entries[key] = {**ceilings.to_dict(), "key": key,
                    "measured_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"schema": CACHE_SCHEMA, "entries": entries}, indent=1, sort_keys=True))
    tmp.replace(path)


# ---------------------------------------------------------------------------------------------------
# Per process: measured (or loaded) once, re-measured at most once

_CEILINGS: dict[int, Ceilings] = {}
_REMEASURED: set[int] = set()


def measure_ceilings(device: int, nbytes: int = SWEEP_BYTES) -> Ceilings:
    """This device's ceilings: from this process, else the cache, else measured (and cached)."""
    if device not in _CEILINGS:
        key = device_key(device)
        cached = load_cached(key)
        if cached is None:
            cached = replace(_measure(device, nbytes), source="measured", key=key)
            _store_quietly(key, cached)
        _CEILINGS[device] = cached
    return _CEILINGS[device]


def remeasure_ceilings(device: int, nbytes: int = SWEEP_BYTES) -> Ceilings:
    """Measure again, once per process per device (a kernel beat the ceiling); later calls return the
    re-measured ceilings. The better of the old and new figure of each kind is kept, and cached."""
    if device in _REMEASURED:
        return _CEILINGS[device]
    old = measure_ceilings(device, nbytes)
    fresh = _measure(device, nbytes)
    merged = replace(old, read_bps=max(old.read_bps, fresh.read_bps), copy_bps=max(old.copy_bps, fresh.copy_bps),
                     write_bps=np.nanmax([old.write_bps, fresh.write_bps]).item(), peak_bps=fresh.peak_bps,
                     best=fresh.best, spread=fresh.spread, nbytes=fresh.nbytes, source="re-measured")
    _store_quietly(merged.key or device_key(device), merged)
    _CEILINGS[device] = merged
    _REMEASURED.add(device)
    return merged


def _store_quietly(key: str, ceilings: Ceilings) -> None:
    try:
        store_cached(key, ceilings)
    except OSError:  # a read-only home still benches; the next process measures again
        pass


def device_key(device: int) -> str:
    """name | PCI bus id | driver: a new card or driver measures again."""
    from cupy_backends.cuda.api import runtime

    from strata_bench.gpu import nvml

    props = runtime.getDeviceProperties(device)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    try:
        driver = nvml.text(nvml.nvml().nvmlSystemGetDriverVersion())
    except Exception:  # noqa: BLE001 - no NVML: the CUDA driver version is the next best key
        driver = f"cuda {runtime.driverGetVersion()}"
    return f"{name}|{nvml.pci_bus_id(props)}|{driver}"


# ---------------------------------------------------------------------------------------------------
# The sweep

_SWEEP_KERNELS = r"""
// Grid-stride over n int4 (16-byte) elements; each thread keeps U independent accesses in flight.
// Streaming hints (__ldcs/__stcs) so the L2 does not keep what one pass touched.
template <int U> __global__ void strata_read(const int4* __restrict__ src, long long n, int* out) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int acc = 0;
    for (; i + (U - 1) * stride < n; i += U * stride) {
        int4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += stride) { int4 v = __ldcs(src + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
    if (acc == 0x7fffffff) out[0] = acc;  // keeps the loads alive; never true for the fill used
}
template <int U> __global__ void strata_write(int4* __restrict__ dst, long long n, int value) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int4 v = make_int4(value, value, value, value);
    for (; i + (U - 1) * stride < n; i += U * stride) {
#pragma unroll
        for (int u = 0; u < U; ++u) __stcs(dst + i + u * stride, v);
    }
    for (; i < n; i += stride) __stcs(dst + i, v);
}
template <int U> __global__ void strata_copy(const int4* __restrict__ src, int4* __restrict__ dst, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; i + (U - 1) * stride < n; i += U * stride) {
        int4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < U; ++u) __stcs(dst + i + u * stride, v[u]);
    }
    for (; i < n; i += stride) __stcs(dst + i, __ldcs(src + i));
}
"""


@dataclass(frozen=True)
class Trial:
    """One configuration of the sweep: its kind, a description, and its passes' seconds."""

    kind: str  # "read", "write", "copy"
    config: str
    seconds: tuple[float, ...] = field(default=())

    @property
    def median_s(self) -> float:
        return float(np.median(self.seconds))


def best_of(trials: list[Trial], bytes_per_pass: dict[str, int]) -> tuple[dict[str, float], tuple[str, ...], float]:
    """Per kind, the best configuration's bandwidth (bytes / median seconds), what it was, and the largest
    relative spread of a winner's passes (how far one pass strays from another)."""
    bps, best, spread = {}, [], 0.0
    for kind in dict.fromkeys(t.kind for t in trials):
        mine = [t for t in trials if t.kind == kind]
        win = min(mine, key=lambda t: t.median_s)
        bps[kind] = bytes_per_pass[kind] / win.median_s
        best.append(f"{kind}: {win.config}")
        spread = max(spread, (max(win.seconds) - min(win.seconds)) / win.median_s)
    return bps, tuple(best), spread


def sweep_plan(sms: int) -> list[tuple[str, int, int]]:
    """(kind, unroll, blocks) for every tuned kernel the sweep times."""
    return [(kind, u, sms * g) for kind in ("read", "write", "copy") for u in UNROLLS for g in GRID_PER_SM]


def _measure(device: int, nbytes: int) -> Ceilings:
    # The buffers (2 x 8 GiB) are freed when this returns, before any case is timed.
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(device)
    free, _total = cupy.cuda.runtime.memGetInfo()
    nbytes = int(min(nbytes, free // 3)) // (16 * BLOCK) * (16 * BLOCK)  # room for src, dst and others
    src = cupy.full(nbytes // 4, 0x01020304, dtype=cupy.int32)
    dst = cupy.empty_like(src)
    sink = cupy.zeros(1, dtype=cupy.int32)
    names = [f"strata_{k}<{u}>" for k in ("read", "write", "copy") for u in UNROLLS]
    module = cupy.RawModule(code=_SWEEP_KERNELS, options=("-std=c++17",), name_expressions=names)
    n16 = np.int64(nbytes // 16)
    trials = []
    for kind, u, blocks in sweep_plan(int(props["multiProcessorCount"])):
        fn = module.get_function(f"strata_{kind}<{u}>")
        args = {"read": (src, n16, sink), "write": (dst, n16, np.int32(7)), "copy": (src, dst, n16)}[kind]
        seconds = _pass_seconds(lambda: fn((blocks,), (BLOCK,), args))
        trials.append(Trial(kind, f"16B x{u}, {blocks} blocks of {BLOCK}", seconds))
    stream = cupy.cuda.get_current_stream()
    trials.append(Trial("copy", "cudaMemcpy", _pass_seconds(
        lambda: dst.data.copy_from_device_async(src.data, nbytes, stream))))
    bps, best, spread = best_of(trials, {"read": nbytes, "write": nbytes, "copy": 2 * nbytes})
    return Ceilings(read_bps=bps["read"], copy_bps=bps["copy"], write_bps=bps["write"],
                    peak_bps=_peak_bps(device, props), nbytes=nbytes, best=best, spread=spread)


def _peak_bps(device: int, props: dict[str, Any]) -> float:
    """From NVML's maximum memory clock where it is readable, else the CUDA device attributes."""
    from cupy_backends.cuda.api import runtime

    from strata_bench.gpu import nvml

    info = nvml.nvml_device_info(nvml.pci_bus_id(props), device)
    mhz = info.get("max_memory_clock_mhz")
    width = int(props.get("memoryBusWidth", 0) or 0)
    try:
        mhz = mhz or runtime.deviceGetAttribute(runtime.cudaDevAttrMemoryClockRate, device) / 1000
        width = width or runtime.deviceGetAttribute(runtime.cudaDevAttrGlobalMemoryBusWidth, device)
    except Exception:  # noqa: BLE001 - an attribute this CUDA does not have: no peak, said so
        pass
    return theoretical_peak_bps(mhz, width)


def _pass_seconds(fn: Callable[[], Any], reps: int = REPS) -> tuple[float, ...]:
    import cupy

    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    fn()  # not timed: module load, first touch
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return tuple(times)
