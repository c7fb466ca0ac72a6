"""Float64 references of y = W x for formats only a foreign variant runs (docs/ARITHMETIC.md, "Formats only a
foreign variant runs"): the legacy q4_0 .. q5_1 and the K-quants, which no built-in kernel has, so no
arithmetic contract of this project fixes how they are computed. The bound is that of a model wide enough
for an engine's integer-dot kernel (llama.cpp's mul_mat_vec_q): per 32-weight chunk, exact integer dots of
the codes with the q8_1 codes; each scale product (a block's fp16 scale times the q8_1 d, or times the q8_1
block's s, the fp16 sum of the raw activations) formed in fp32, or in fp16 for q4_1 and q5_1 (as ggml's
__hmul2); a few fp32 roundings per term; any summation order.

A value is sum over the format's fp16 scale fields f of S_f * u_f, u_f exact small integers (formats/
_common.py's unit values); q4_0 and q5_0 store unsigned codes c = u + o (o = 8, 16), and the kernel may
apply d * d8 to c and -o * d to s.
"""
from __future__ import annotations

import numpy as np

from strata_bench.numerics.bounds import U32, U64, gamma, q8_1_value_error
from strata_bench.numerics.matvec import MatvecRef
from strata_bench.numerics.q8_1 import dequantize_q8_1, unpack_q8_1

# Formats whose first scale field multiplies unsigned codes with an offset the kernel may apply to s.
FLOAT_OFFSETS = {"q4_0": 8, "q5_0": 16}
# Formats whose scale products may be formed in fp16 (ggml's __hmul2(dm, ds8) on cards with fast fp16);
# the others' in fp32, where a product of two fp16 values is exact and far from underflow.
FP16_PRODUCTS = ("q4_1", "q5_1")
FP16_PRODUCT_REL = 2.0 ** -11  # half an fp16 ulp, relative, in the normal range
FP16_PRODUCT_ABS = 2.0 ** -25  # half the fp16 spacing of the subnormal range (also covers a flush to 0)
TERM_ROUNDINGS = 4  # fp32 roundings of one scale product's term: the product (where fp32), times the
# integer dot, times a sub-scale or the other scale (ggml's longest chain: d * (d8 * (sumi * sc)))
REDUCTION_SLACK = 32  # additions beyond one per weight: lanes, warps, partial sums


def term_error(fmt: str) -> tuple[float, float]:
    """(rho, alpha): one term's error is at most rho |term| + alpha |integer it multiplies| (an fp16
    product's half ulp, or none, then TERM_ROUNDINGS fp32 roundings)."""
    chain = (1.0 + U32) ** TERM_ROUNDINGS
    if fmt in FP16_PRODUCTS:
        return (1.0 + FP16_PRODUCT_REL) * chain - 1.0, FP16_PRODUCT_ABS * chain
    return chain - 1.0, 0.0


def _fields(fmt: str, raw: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(scale per value, unit value per value), both float64 (rows, K), for each scale field."""
    from strata_bench.formats import get_format

    spec = get_format(fmt)
    blocks = spec.blocks(raw)
    rows = raw.shape[0]
    out = []
    for field in spec.scales:
        scale = np.repeat(field.read(blocks), spec.block_size).reshape(rows, -1)
        out.append((scale, spec.unit_values(blocks, field).reshape(rows, -1)))
    return out


def chunk_magnitudes(fmt: str, raw: np.ndarray) -> dict[str, np.ndarray]:
    """The weight-side factors of the bound, per row: `w` the exact values (rows, K); `scaled` sum_f |S_f| a_f
    and `codes` sum_f a_f (rows, K), a_f = |u_f| + o_f the magnitude of a code as the kernel may hold it;
    `sigma` (rows, K/32), the coefficient a chunk may apply to s: o * |d|, plus |S_f u_f| for each field
    constant over the chunk (q4_1's m, a K-quant's min); `s_products` (rows,) how many such products."""
    fields = _fields(fmt, raw)
    offset = FLOAT_OFFSETS.get(fmt, 0)
    w = np.zeros_like(fields[0][0])
    scaled, codes = np.zeros_like(w), np.zeros_like(w)
    rows, k = w.shape
    sigma = np.zeros((rows, k // 32))
    s_products = np.zeros(rows)
    for i, (scale, unit) in enumerate(fields):
        o = offset if i == 0 else 0
        w += scale * unit
        scaled += np.abs(scale) * (np.abs(unit) + o)
        codes += np.abs(unit) + o
        chunk_unit = unit.reshape(rows, -1, 32)
        constant = (chunk_unit == chunk_unit[..., :1]).all(axis=-1)
        chunk_scale = np.abs(scale[:, ::32])
        sigma += chunk_scale * (o + np.where(constant, np.abs(chunk_unit[..., 0]), 0.0))
        s_products += (constant | (o > 0)).sum(axis=1)
    return {"w": w, "scaled": scaled, "codes": codes, "sigma": sigma, "s_products": s_products}


def foreign_matvec_reference(fmt: str, raw: np.ndarray, x: np.ndarray, act: np.ndarray) -> MatvecRef:
    """References and per-output bounds of y[c][r] = sum_k w[r,k] x[c,k] for a foreign format's kernel.

    raw (rows, bytes_per_row) blocks; x (n, K) float32; act (n, K/32*36) its q8_1 blocks. The references
    are those of the built-in formats (matvec.matvec_reference), over the exact values (dequantize_f64:
    gguf-py's float32 rounds d*sc*q - dmin*m for q4_k and q5_k). Bound (q8_1 acts), per output:
      e = rho mag + alpha cnt + sum_c sigma_c |s_c - sum xq_c|
      bound_q = e + gamma_{K+32} (mag + e) + gamma64_K sum|w||xq|
    mag = sum_k scaled_k |xq_k| + sum_c sigma_c |s_c| (every term's magnitude), cnt = sum_k codes_k |q_k|
    + s_products (the integers an fp16 product's absolute error is multiplied by)."""
    m = chunk_magnitudes(fmt, raw)
    rho, alpha = term_error(fmt)
    w = m["w"]
    k = w.shape[1]
    xq = dequantize_q8_1(act)  # (n, K), exact
    _, s, q = unpack_q8_1(act)  # s (n, K/32), q (n, K/32, 32)
    x64 = x.astype(np.float64)
    s_gap = np.abs(s - xq.reshape(s.shape[0], -1, 32).sum(axis=-1))  # float64: exact enough (gamma64 below)
    mag = m["scaled"] @ np.abs(xq).T + m["sigma"] @ np.abs(s).T
    cnt = m["codes"] @ np.abs(q.reshape(q.shape[0], -1)).astype(np.float64).T + m["s_products"][:, None]
    e = rho * mag + alpha * cnt + m["sigma"] @ s_gap.T
    w_abs = np.abs(w)
    wxq = w_abs @ np.abs(xq).T
    bound_q = e + float(gamma(k + REDUCTION_SLACK)) * (mag + e) + float(gamma(k, U64)) * (wxq + mag)
    amax = np.abs(x64).reshape(x.shape[0], -1, 32).max(axis=-1)
    err = np.repeat(q8_1_value_error(amax), 32, axis=1)
    bound_raw = bound_q + w_abs @ err.T + float(gamma(k, U64)) * (w_abs @ np.abs(x64).T)
    return MatvecRef((w @ xq.T).T.copy(), (w @ x64.T).T.copy(), bound_q.T.copy(), bound_raw.T.copy())
