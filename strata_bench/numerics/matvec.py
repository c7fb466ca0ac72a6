"""Float64 references of y = W x computed by the kernels' contract (docs/ARITHMETIC.md, section 3): exact
weight values, the reference over q8_1 and over raw activations, and the per-output error bounds."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from strata_bench.numerics.bounds import U64, gamma, q8_1_value_error
from strata_bench.numerics.q8_1 import dequantize_q8_1


def exact_weights(fmt: str, raw: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """float64 (rows, cols) exact weight values (or float32, `dtype`: the same values in half the memory,
    which matvec_reference widens a block of rows at a time).

    gguf-py's float32 dequantization is exact for every format here (docs/ARITHMETIC.md, section 1:
    each value is a product of factors whose significands fit in 24 bits), so widening it loses
    nothing; tests/numerics/test_matvec.py checks it against the formats' dequantize_f64.
    """
    from strata_bench.formats import get_format

    return get_format(fmt).dequantize(raw).astype(dtype, copy=False)


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

    w64 (rows, K) exact weights, float64 or float32 (widened a block of `ref_rows` rows at a time into
    one reused array: the same products, without a float64 copy of the whole matrix, 1 GiB at 131072 x
    1024, whose page faults took half of that case's 6.8 s on the CPU host); x (n, K) float32 raw
    activations; act (n, K/32*36) their q8_1 blocks.
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
    wide = None if w64.dtype == np.float64 else np.empty((min(ref_rows, rows), k))
    magnitudes = np.empty((min(ref_rows, rows), k))  # |block|, one array for every block
    for r0 in range(0, rows, ref_rows):
        block = w64[r0:r0 + ref_rows]
        if wide is not None:  # float32 values widened, exactly, into the reused array
            np.copyto(wide[:len(block)], block)
            block = wide[:len(block)]
        y.append(block @ rhs)
        mags.append(np.abs(block, out=magnitudes[:len(block)]) @ rhs_abs)
    y = np.concatenate(y).T
    mags = np.concatenate(mags).T
    bound_q = rel * mags[:n]
    bound_raw = bound_q + mags[n:2 * n] + float(gamma(k, U64)) * mags[2 * n:]
    return MatvecRef(y[:n].copy(), y[n:].copy(), bound_q, bound_raw)
