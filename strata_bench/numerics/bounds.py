"""Rounding-error algebra of docs/ARITHMETIC*.md: Higham's gamma, fp16 half ulps, and the error of q8_1
quantization (a-priori per block, and of values known only within an interval)."""
from __future__ import annotations

import numpy as np

from strata_bench.numerics.q8_1 import dequantize_q8_1, quantize_q8_1

U32 = 2.0 ** -24  # unit roundoff of fp32 (round to nearest)
U64 = 2.0 ** -53
FP16_MIN_NORMAL = 2.0 ** -14


def gamma(n, u: float = U32):
    """Higham's gamma_n = n u / (1 - n u): the relative bound of n successive roundings."""
    n = np.asarray(n, dtype=np.float64)
    return n * u / (1.0 - n * u)


def fp16_half_ulp(a) -> np.ndarray:
    """Largest rounding error of fp32->fp16 round-to-nearest for magnitudes up to `a` (finite range):
    half the fp16 spacing of a's binade, 2^-25 in the subnormal range."""
    a = np.abs(np.asarray(a, dtype=np.float64))
    exponent = np.floor(np.log2(np.maximum(a, FP16_MIN_NORMAL)))
    return np.ldexp(1.0, (exponent - 11).astype(np.int64))


def q8_1_value_error(amax: np.ndarray) -> np.ndarray:
    """Bound on |x - float(d16) * q| for one block quantized from fp32 values with max |x| = amax.

    With d = fp32(amax/127): |x/d| <= 127 (1 + u), q = roundf(fp32(x/d)) is within 0.5 + 128u of x/d,
    so |x - d q| <= d (0.5 + 128u); the stored fp16 d16 is within fp16_half_ulp(d) of d and |q| <= 127.
    """
    d = np.asarray(amax, dtype=np.float64) / 127.0 * (1.0 + U32)
    return d * (0.5 + 128 * U32) + 127.0 * fp16_half_ulp(d)


# --- q8_1 of values known only within an interval -----------------------------------------------------
def _f32_down(x: np.ndarray) -> np.ndarray:
    """The largest float32 <= x, elementwise."""
    y = x.astype(np.float32)
    return np.where(y.astype(np.float64) > x, np.nextafter(y, np.float32(-np.inf)), y)


def _f32_up(x: np.ndarray) -> np.ndarray:
    y = x.astype(np.float32)
    return np.where(y.astype(np.float64) < x, np.nextafter(y, np.float32(np.inf)), y)


def q8_1_deviation(h: np.ndarray, th: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q8_1 of device values that are only known to lie within th of h (float64 (n, K)).

    Returns (ref, dev, mag): ref = the q8_1-dequantized values of float32(h) as numpy (and the device)
    quantize them; dev >= |device's q8_1-dequantized value - ref| and mag >= |device's value|, per element.
    quantize_q8_1_lane is monotone in every step (amax, d32 = fl32(amax/127), q = roundf(fl32(v/d32)),
    d16 = fp16(d32)), so intervals of its inputs map to intervals through their ends, and d16*q is
    bilinear, so its extremes over the (d16, q) box are at the corners. Blocks whose amax interval
    reaches 0 are left fully open (q anywhere in [-127, 127]).
    """
    n, k = h.shape
    lo = _f32_down(h - th).reshape(n, -1, 32)
    hi = _f32_up(h + th).reshape(n, -1, 32)
    straddles = (lo <= 0) & (hi >= 0)
    a_lo = np.where(straddles, np.float32(0), np.minimum(np.abs(lo), np.abs(hi))).max(axis=-1)
    a_hi = np.maximum(np.abs(lo), np.abs(hi)).max(axis=-1)
    d_lo, d_hi = a_lo / np.float32(127), a_hi / np.float32(127)  # float32 division, as the device
    open_block = (d_lo == 0)[..., None]
    safe_lo = np.where(d_lo == 0, np.float32(1), d_lo)[..., None]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        corners = np.stack([lo / safe_lo, lo / d_hi[..., None], hi / safe_lo, hi / d_hi[..., None]])
    r_min, r_max = corners.min(axis=0).astype(np.float64), corners.max(axis=0).astype(np.float64)
    q_lo = np.where(open_block, -127, np.clip(np.trunc(r_min + np.copysign(0.5, r_min)), -127, 127))
    q_hi = np.where(open_block, 127, np.clip(np.trunc(r_max + np.copysign(0.5, r_max)), -127, 127))
    d16 = [d.astype(np.float16).astype(np.float64)[..., None] for d in (d_lo, d_hi)]
    values = np.stack([d * q for d in d16 for q in (q_lo, q_hi)])  # (4, n, blocks, 32)
    ref = dequantize_q8_1(quantize_q8_1(h.astype(np.float32))).reshape(n, -1, 32)
    dev = np.abs(values - ref).max(axis=0)
    mag = np.abs(values).max(axis=0)
    return ref.reshape(n, k), dev.reshape(n, k), mag.reshape(n, k)
