"""Launch helpers a family's variants share: grid arithmetic, opting in to more dynamic shared memory,
and occupancy (how many blocks of a kernel fit on the device at once, for persistent grids)."""
from __future__ import annotations

import functools
from typing import Any

DEFAULT_SHARED_LIMIT = 48 * 1024  # bytes of shared memory a kernel may use without opting in

_OPTED_IN: dict[int, int] = {}


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


def resident_sms(device: int | None = None) -> int:
    """The SM count of the current (or given) device (a stream-k grid's width). Cached like the occupancy."""
    import cupy

    return _sm_count(cupy.cuda.Device().id if device is None else device)


@functools.lru_cache(maxsize=None)
def _sm_count(dev: int) -> int:
    from cupy_backends.cuda.api import runtime

    return int(runtime.getDeviceProperties(dev)["multiProcessorCount"])


def compute_major(device: int | None = None) -> int:
    """The compute capability's major version of the current (or given) device: which kernels it runs
    (tensor-core mma.sync of int8 needs 8). Cached like the occupancy."""
    import cupy

    return _compute_major(cupy.cuda.Device().id if device is None else device)


@functools.lru_cache(maxsize=None)
def _compute_major(dev: int) -> int:
    from cupy_backends.cuda.api import runtime

    return int(runtime.getDeviceProperties(dev)["major"])


def shared_optin(device: int | None = None) -> int:
    """The most shared memory (bytes, static and dynamic together) one block of a kernel may opt in to on
    the current (or given) device: 227 KiB on sm_90, 163 KiB on sm_80, 99 KiB on sm_86/89. Cached like the
    occupancy."""
    import cupy

    return _shared_optin(cupy.cuda.Device().id if device is None else device)


@functools.lru_cache(maxsize=None)
def _shared_optin(dev: int) -> int:
    from cupy_backends.cuda.api import runtime

    return int(runtime.getDeviceProperties(dev)["sharedMemPerBlockOptin"])


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
    """Dynamic shared memory of a kernel that stages `rows` rows of `nchunks` q8_1 blocks (mmvq's new kernels
    stage one pass of activations, grouped's one window of entries)."""
    from strata_bench.numerics.q8_1 import Q8_1_BYTES

    return rows * nchunks * Q8_1_BYTES
