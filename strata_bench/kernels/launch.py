"""Launch helpers a family's variants share: grid arithmetic, opting in to more dynamic shared memory,
and occupancy (how many blocks of a kernel fit on the device at once, for persistent grids)."""
from __future__ import annotations

import functools
from typing import Any

DEFAULT_SHARED_LIMIT = 48 * 1024  # bytes of shared memory a kernel may use without opting in

_OPTED_IN: dict[int, int] = {}
_CARVEOUT: dict[int, int] = {}
RESERVED_SHARED_PER_BLOCK = 1024  # bytes the driver keeps per resident block (sm_80 and later)


def ceil_div(n: int, d: int) -> int:
    """The smallest integer >= n / d (blocks needed to cover n items, d per block), exact for any size."""
    return -(-n // d)


def allow_dynamic_shared(fn: Any, nbytes: int, static_bytes: int = 0) -> None:
    """Raise a kernel's dynamic shared memory limit when a launch needs more than the default 48 KiB.

    A driver attribute of the function, not a stream operation, so it is safe while a graph is captured.
    """
    if nbytes + static_bytes <= DEFAULT_SHARED_LIMIT or _OPTED_IN.get(fn.ptr, 0) >= nbytes:
        return
    from cupy_backends.cuda.api import driver

    driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
    _OPTED_IN[fn.ptr] = nbytes


def prefer_l1(fn: Any, threads: int, dynamic: int, static: int, smallest: bool = True) -> None:
    """Ask for the smallest shared-memory carveout that still holds as many blocks per SM as the kernel's
    other limits (registers, threads) allow, leaving the rest of the SM's 256 KB to the L1 cache; with
    smallest=False, take a hint set before back (the driver's default, -1: one kernel may serve launches
    that want either).

    Without the hint the driver sizes the carveout for as many blocks as shared memory alone would allow
    (8 blocks, 100 KB, for mmvq_new at one column where registers allow 3: ncu), and a kernel whose lanes
    read each weight line several times loses the L1 capacity that keeps those lines. A driver attribute
    of the function (a percentage of the largest carveout), safe while a graph is captured."""
    from cupy_backends.cuda.api import driver, runtime

    if not smallest and fn.ptr not in _CARVEOUT:
        return
    percent = _smallest_carveout(fn.ptr, threads, dynamic, static, runtime.getDevice()) if smallest else -1
    if _CARVEOUT.get(fn.ptr, -1) != percent:
        driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent)
        _CARVEOUT[fn.ptr] = percent


@functools.lru_cache(maxsize=None)
def _smallest_carveout(fn_ptr: int, threads: int, dynamic: int, static: int, dev: int) -> int:
    from cupy_backends.cuda.api import driver, runtime

    per_sm = max(1, driver.occupancyMaxActiveBlocksPerMultiprocessor(fn_ptr, threads, dynamic))
    largest = runtime.deviceGetAttribute(runtime.cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev)
    return min(100, ceil_div(100 * per_sm * (dynamic + static + RESERVED_SHARED_PER_BLOCK), largest))


def resident_blocks(fn: Any, threads: int, shared: int, device: int | None = None) -> int:
    """How many blocks of this kernel fit on the whole device at once (for persistent grids)."""
    import cupy

    dev = cupy.cuda.Device().id if device is None else device
    return _resident_blocks(fn.ptr, threads, shared, dev)


@functools.lru_cache(maxsize=None)
def _resident_blocks(fn_ptr: int, threads: int, shared: int, dev: int) -> int:
    # Cached: getDeviceProperties costs about a millisecond of host time, far more than a launch, and
    # neither the SM count nor a kernel's occupancy changes within a process.
    from cupy_backends.cuda.api import driver, runtime

    sms = runtime.getDeviceProperties(dev)["multiProcessorCount"]
    per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(fn_ptr, threads, shared)
    return max(1, per_sm) * sms


def launch_quantize_q8_1(kernels: Any, x: Any, xq: Any, n_blocks: int, stream: Any = None) -> None:
    """quantize_q8_1 (kernels_src' q8_1 source): float32 x -> q8_1 blocks xq, one warp per 32 values,
    8 warps per block. The first step of every mat-vec over q8_1 activations."""
    import numpy as np

    fn = kernels.get("quantize_q8_1")
    fn((ceil_div(n_blocks, 8),), (256,), (x, np.int64(n_blocks), xq), stream=stream)


def decode_table_bytes(fmt: str) -> int:
    """Static shared memory of a kernel that stages a format's decode table (SharedTab<F> in
    common/iq_decode.cuh): its TABLE_WORDS and two constants, 4 bytes each."""
    from strata_bench.kernels.constants import TABLE_WORDS

    return 4 * (TABLE_WORDS[fmt] + 2)


def q8_1_staging_bytes(rows: int, nchunks: int) -> int:
    """Dynamic shared memory of a kernel that stages `rows` rows of `nchunks` q8_1 blocks (mmvq's and
    grouped's new kernels stage one pass of activations)."""
    from strata_bench.numerics.q8_1 import Q8_1_BYTES

    return rows * nchunks * Q8_1_BYTES
