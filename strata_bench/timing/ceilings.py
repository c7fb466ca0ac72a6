"""The device's own bandwidth ceilings (streaming read, device-to-device copy), measured once per process,
so bench can report each kernel's GB/s as a fraction of what this card actually reaches."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ceilings:
    """The device's own measured bandwidth, bytes per second."""

    read_bps: float  # read-only streaming
    copy_bps: float  # device-to-device copy, bytes read + written


_READ_KERNEL = r"""
extern "C" __global__ void strata_read_ceiling(const int4* __restrict__ src, long long n, int* out) {
    int acc = 0;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        int4 v = __ldcs(src + i);  // streaming load: do not keep in L2
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x7fffffff) out[0] = acc;  // keeps the loads alive; never true for the fill used
}
"""

_CEILINGS: dict[int, Ceilings] = {}


def measure_ceilings(device: int, nbytes: int = 2 << 30) -> Ceilings:
    """Read-only and copy bandwidth of this device, measured once per process (median of 20)."""
    if device not in _CEILINGS:
        _CEILINGS[device] = _measure(device, nbytes)
    return _CEILINGS[device]


def _measure(device: int, nbytes: int) -> Ceilings:
    # The 2 x 2 GiB of buffers are freed when this returns, before any case is timed.
    import cupy

    src = cupy.full(nbytes // 4, 0x01020304, dtype=cupy.int32)
    dst = cupy.empty_like(src)
    sink = cupy.zeros(1, dtype=cupy.int32)
    kernel = cupy.RawKernel(_READ_KERNEL, "strata_read_ceiling")
    sms = cupy.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"]
    n16 = np.int64(nbytes // 16)
    read_s = _median_seconds(lambda: kernel((sms * 8,), (512,), (src, n16, sink)))
    copy_s = _median_seconds(lambda: dst.__setitem__(Ellipsis, src))
    return Ceilings(read_bps=nbytes / read_s, copy_bps=2 * nbytes / copy_s)


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
