"""Host-side q8_1 blocks: quantize, unpack and dequantize exactly as the device does.

`quantize_q8_1` mirrors `quantize_q8_1_lane` of kernels_src/common/strata_common.cuh bit for bit:
amax = max|x|, d = fp32(amax / 127) (IEEE division), q = roundf(fp32(x / d)) (half away from zero),
0 when amax == 0; stored d = fp16(d) and s = fp16(sum) where the sum is taken in the butterfly order of
`warp_sum_f32` (xor 16, 8, 4, 2, 1). numpy's float32 division and float32->float16 casts are IEEE
round-to-nearest-even, the same as the device's.
"""
from __future__ import annotations

import numpy as np

from strata_bench.errors import InputError

Q8_1_VALUES = 32  # values per q8_1 block
Q8_1_BYTES = 36  # bytes per block: fp16 d, fp16 s, 32 int8 codes

_BLOCK_DTYPE = np.dtype([("d", "<f2"), ("s", "<f2"), ("qs", "i1", (Q8_1_VALUES,))])
assert _BLOCK_DTYPE.itemsize == Q8_1_BYTES


def butterfly_sum_f32(x: np.ndarray) -> np.ndarray:
    """Lane 0's result of warp_sum_f32 over the last axis (32 lanes), in float32."""
    v = np.ascontiguousarray(x, dtype=np.float32)
    lanes = np.arange(Q8_1_VALUES)
    for offset in (16, 8, 4, 2, 1):
        v = v + v[..., lanes ^ offset]
    return v[..., 0]


def roundf(x: np.ndarray) -> np.ndarray:
    """C's roundf (half away from zero) of float32 values; exact, via float64 (x + 0.5 is exact there)."""
    x64 = np.asarray(x, dtype=np.float64)
    return np.trunc(x64 + np.copysign(0.5, x64))


def quantize_q8_1(x: np.ndarray) -> np.ndarray:
    """float32 (..., n) with n % 32 == 0 -> uint8 (..., n/32 * 36) q8_1 blocks, as the device makes them."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.shape[-1] % Q8_1_VALUES:
        raise InputError(f"q8_1 needs a multiple of {Q8_1_VALUES} values per row, got {x.shape[-1]}")
    groups = x.reshape(*x.shape[:-1], -1, Q8_1_VALUES)
    amax = np.abs(groups).max(axis=-1)
    d = amax / np.float32(127)  # float32 / float32: IEEE
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = groups / d[..., None]
    q = np.where(amax[..., None] == 0, 0.0, roundf(ratio)).astype(np.int8)
    blocks = np.empty(groups.shape[:-1], dtype=_BLOCK_DTYPE)
    with np.errstate(over="ignore"):
        blocks["d"] = d.astype(np.float16)
        blocks["s"] = butterfly_sum_f32(groups).astype(np.float16)
    blocks["qs"] = q
    return blocks.view(np.uint8).reshape(*x.shape[:-1], -1)


def unpack_q8_1(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 (..., nb*36) -> (d float64 (..., nb), s float64 (..., nb), q int8 (..., nb, 32))."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if raw.shape[-1] % Q8_1_BYTES:
        raise InputError(f"q8_1 rows must be a multiple of {Q8_1_BYTES} bytes, got {raw.shape[-1]}")
    blocks = raw.view(_BLOCK_DTYPE).reshape(*raw.shape[:-1], -1)
    return blocks["d"].astype(np.float64), blocks["s"].astype(np.float64), blocks["qs"].copy()


def dequantize_q8_1(raw: np.ndarray) -> np.ndarray:
    """float64 (..., nb*32): float(d) * q, the values an integer dot product sees."""
    d, _, q = unpack_q8_1(raw)
    return (d[..., None] * q).reshape(*q.shape[:-2], -1)
