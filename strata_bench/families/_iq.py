"""What the i-quant families (dequant, q8_1, mmvq, grouped) share: formats and their CUDA traits, weight
data (seeded, edge, real-weight fixtures), padded device layout, and the float64 mat-vec reference with
the tolerances of docs/ARITHMETIC.md.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from strata_bench.errors import InputError
from strata_bench.families._data import DataSource
from strata_bench.families._q8_1 import U64, dequantize_q8_1, gamma, q8_1_value_error

# Formats of kernels_src/common/iq_decode.cuh, in the order the case lists use; value = the CUDA traits struct.
FORMATS = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "q8_0", "q2_0")
ROW_ALIGN = 16  # device rows start 16-byte aligned (row stride rounded up)
TAIL_SLACK = 16  # readable bytes after the last row: the kernels' aligned word loads may touch them
ACT_SEED_OFFSET = 104729  # activations get their own random stream, independent of the weights
OUTLIER = 3.0e4
Q2_0_FIXTURE_SOURCE = "q8_0"  # q2_0 has no GGUF type: its fixture rows are the q8_0 rows requantized


def traits(fmt: str) -> str:
    """The CUDA traits struct of a format, as used in name expressions."""
    if fmt not in FORMATS:
        raise InputError(f"format {fmt!r} has no i-quant kernel; formats: {', '.join(FORMATS)}")
    return f"siq::fmt_{fmt}"


def row_stride(fmt: str, cols: int) -> int:
    from strata_bench.formats import get_format

    return -(-get_format(fmt).bytes_per_row(cols) // ROW_ALIGN) * ROW_ALIGN


def chunks_per_row(cols: int) -> int:
    if cols <= 0 or cols % 32:
        raise InputError(f"inputs per row must be a positive multiple of 32, got {cols}")
    return cols // 32


def check_shape(fmt: str, cols: int) -> None:
    from strata_bench.formats import get_format

    block = get_format(fmt).block_size
    if cols <= 0 or cols % block:
        raise InputError(f"{fmt}: inputs per row must be a positive multiple of {block}, got {cols}")


# --- weights ----------------------------------------------------------------------------------------
def weights(fmt: str, rows: int, cols: int, src: DataSource, salt: int = 0) -> tuple[np.ndarray, str]:
    """Raw blocks (rows, bytes_per_row) and a note on where they came from.

    Fixture rows are tiled (repeated) to `rows` when the fixture has fewer; q2_0 takes the q8_0
    fixture's values requantized by Q2_0.quantize. `salt` separates several matrices of one case.
    """
    from strata_bench.data.store import load_fixture
    from strata_bench.data.synthetic import synthetic_weights
    from strata_bench.formats import get_format

    if src.kind != "fixture":
        return synthetic_weights(fmt, rows, cols, src.seed * 1009 + salt, edge=src.edge), f"{src.kind}:{src.seed}"
    fix = load_fixture(src.fixture)
    if fix.cols != cols:
        raise InputError(f"fixture {src.fixture} has {fix.cols} inputs per row, the case {cols}")
    if fix.fmt == fmt:
        raw = fix.raw
    elif fmt == "q2_0":
        raw = get_format("q2_0").quantize(fix.values())
    else:
        raise InputError(f"fixture {src.fixture} is {fix.fmt}, the case {fmt}")
    reps = math.ceil(rows / fix.rows)
    note = f"fixture {src.fixture}" + (f" tiled x{reps}" if reps > 1 else "") + (
        " requantized to q2_0" if fmt != fix.fmt else "")
    return np.ascontiguousarray(np.tile(raw, (reps, 1))[:rows]), note


def exact_weights(fmt: str, raw: np.ndarray) -> np.ndarray:
    """float64 (rows, cols) exact weight values.

    gguf-py's float32 dequantization is exact for every format here (docs/ARITHMETIC.md, section 1:
    each value is a product of factors whose significands fit in 24 bits), so widening it loses
    nothing; tests/test_families_dequant.py checks it against the formats' dequantize_f64.
    """
    from strata_bench.formats import get_format

    return get_format(fmt).dequantize(raw).astype(np.float64)


def padded(fmt: str, raw: np.ndarray) -> np.ndarray:
    """Flat uint8: rows at a 16-byte aligned stride, zero padding, TAIL_SLACK bytes after the last row."""
    rows, nbytes = raw.shape
    stride = -(-nbytes // ROW_ALIGN) * ROW_ALIGN
    out = np.zeros(rows * stride + TAIL_SLACK, dtype=np.uint8)
    out[: rows * stride].reshape(rows, stride)[:, :nbytes] = raw
    return out


def activations(cols: int, n: int, src: DataSource, salt: int = 0) -> np.ndarray:
    """float32 (n, cols) seeded standard-normal activations; with edge data, block 0 of every column is
    all zero (q8_1 d = 0) and block 1 starts with an outlier (the rest of its codes round to 0 or +-1)."""
    from strata_bench.data.synthetic import seeded_activations

    seed = src.seed if src.kind != "fixture" else 0
    x = seeded_activations(seed * 7 + ACT_SEED_OFFSET + salt, (n, cols))
    if src.edge:
        x[:, :32] = 0.0
        if cols > 32:
            x[:, 32] = OUTLIER
    return x


# --- float64 reference of y = W x over q8_1 activations -----------------------------------------------
@dataclass(frozen=True)
class MatvecRef:
    """Per output (ncols, rows): both float64 references and the per-output bounds of the kernels' error."""

    y_q: np.ndarray      # exact weights x q8_1-dequantized activations
    y_raw: np.ndarray    # exact weights x raw activations
    bound_q: np.ndarray  # |y_dev - y_q| <= bound_q
    bound_raw: np.ndarray  # |y_dev - y_raw| <= bound_raw


def chain_depth(nchunks: int) -> int:
    """Most roundings any chunk term meets: its lane's fmaf chain (the first fmaf is exact: 0 + an exact
    term) plus the 5 butterfly additions."""
    return max(math.ceil(nchunks / 32) - 1, 0) + 5


def matvec_reference(w64: np.ndarray, x: np.ndarray, act: np.ndarray, ref_rows: int = 4096) -> MatvecRef:
    """References and bounds for y[c][r] = sum_k w64[r,k] x[c,k] computed by the kernels' contract.

    w64 (rows, K) exact weights; x (n, K) float32 raw activations; act (n, K/32*36) their q8_1 blocks.
    Bound (q8_1 acts): gamma_h * sum_k |w||xq| + gamma64_K (float64's own); (raw acts) adds
    sum_k |w_k| E_k with E the a-priori q8_1 error bound of k's block (docs/ARITHMETIC.md, section 3).
    """
    rows, k = w64.shape
    xq = dequantize_q8_1(act)  # (n, K) float64, exact
    x64 = x.astype(np.float64)
    amax = np.abs(x64).reshape(x.shape[0], -1, 32).max(axis=-1)
    err = np.repeat(q8_1_value_error(amax), 32, axis=1)  # (n, K)
    rel = float(gamma(chain_depth(k // 32))) + float(gamma(k, U64))
    rhs = np.concatenate([xq, x64], axis=0).T  # (K, 2n)
    rhs_abs = np.concatenate([np.abs(xq), err, np.abs(x64)], axis=0).T  # (K, 3n)
    n = x.shape[0]
    y, mags = [], []
    for r0 in range(0, rows, ref_rows):
        block = w64[r0:r0 + ref_rows]
        y.append(block @ rhs)
        mags.append(np.abs(block) @ rhs_abs)
    y = np.concatenate(y).T
    mags = np.concatenate(mags).T
    bound_q = rel * mags[:n]
    bound_raw = bound_q + mags[n:2 * n] + float(gamma(k, U64)) * mags[2 * n:]
    return MatvecRef(y[:n].copy(), y[n:].copy(), bound_q, bound_raw)


def column_passes(ncols: int) -> list[int]:
    """Columns per pass of the new kernels: 8 at a time, then the binary digits of the rest (1, 2, 4)."""
    passes = [8] * (ncols // 8)
    rest = ncols % 8
    passes += [p for p in (4, 2, 1) if rest & p]
    return passes


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
    from strata_bench.families._q8_1 import quantize_q8_1

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
