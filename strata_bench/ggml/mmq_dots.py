"""What each format's mul_mat_q dot computes on Turing and newer (mmq.cuh's ggml_cuda_mmq_get_util_funcs, the
MMA branch; mmq-load-tiles.cuh, mmq-vec-dot.cuh), as exact host arithmetic for family mmq's error model.

Every dot multiplies int8 weight codes by int8 activation codes on the tensor cores (exact) and scales the
integer dots in fp32. What differs between formats is which scales the tile loader stores, how it rounds
them, and whether a second term (a min or offset times the activations' sum) is added:

- vec_dot_q8_0_q8_1_mma, C dA dB a 32-value chunk: q4_0, q5_0, q8_0, iq2_xxs, iq3_xxs, iq3_s, iq4_nl, iq4_xs.
  The loaders' scales are exact in fp32 (d, d ls / 8, (ls d + d / 2) / 2, ls d, d (ls - 32)).
- vec_dot_q8_0_16_q8_1_mma, dB (C0 dA0 + C1 dA1) over two 16-value halves: q3_k (d sc, sc in -32..31),
  iq2_xs and iq2_s ((ls d + d / 2) / 4): exact scales.
- vec_dot_q8_1_q8_1_mma, dA dB C + mA sB a 32-value chunk, (dA, mA) a half2 of the weights and (dB, sB) the
  activations' DS4 half2 (d, fp16 of the chunk's raw sum): q4_1 and q5_1 (the block's d and m, exact);
  q4_k and q5_k (d sc and -dmin m, each rounded to fp16 by the loader's half2 product); iq1_s (d (2 s + 1)
  and d (2 s + 1) (-1 +- 1/8), each rounded to fp16; codes grid + 1 in 0..2).
- vec_dot_q2_K_q8_1_mma, 16-value sub-blocks: (C0 dA0 + C1 dA1) dB - mA sB, (dA, mA) = fp16 of d sc and dmin m
  (the loader's half2 product), dB the D2S6 layout's fp16 scale of 64 values, sB the fp16 sums of 16 raw
  activations (the last two of each 128 values from the codes: Cm dB, exact).
- vec_dot_q6_K_q8_1_mma: (C0 sc0 + C1 sc1) dB, an exact int times a float, four of them summed in fp32 per
  128 values, then times dA = d: exact scales, 6 roundings a term.

So the device computes, up to fp32 rounding, sum_k x_k a'_k + sum_g S'_g b'_g: a' the weights' scaled codes
with the loader's scales, b' each sub-block's offset as the loader stores it, S' the activation sums the dot
reads. `split` gives both that and the exact weights (a + b), from which the model's known term
|Y' - Y| and its rounding magnitude follow (mmq_family.reference).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

F16 = np.float16


@dataclass(frozen=True)
class Dot:
    """One format's dot: its name in mmq-vec-dot.cuh, the fp32 roundings of one term before it is summed,
    the sums a thread makes per 32 values, and the values one offset covers (0: no offset)."""

    name: str
    term_roundings: int
    adds: int
    group: int = 0


Q8_0 = Dot("vec_dot_q8_0_q8_1_mma", 2, 1)
Q8_0_16 = Dot("vec_dot_q8_0_16_q8_1_mma", 3, 1)
Q8_1 = Dot("vec_dot_q8_1_q8_1_mma", 2, 2, 32)
# q2_K: product, the halves' add, the last quarter's min pair (product, add, subtract), times dB; then the
# sum, and two min products subtracted a 32-value chunk.
Q2_K = Dot("vec_dot_q2_K_q8_1_mma", 5, 3, 16)
# q6_K: int dot times dB, four such added in tmp, times dA, added: 1 + 4 + 1 and one sum per 128 values.
Q6_K = Dot("vec_dot_q6_K_q8_1_mma", 6, 1)
DOTS = {"q4_0": Q8_0, "q5_0": Q8_0, "q8_0": Q8_0, "iq2_xxs": Q8_0, "iq3_xxs": Q8_0, "iq3_s": Q8_0,
        "iq4_nl": Q8_0, "iq4_xs": Q8_0, "q3_k": Q8_0_16, "iq2_xs": Q8_0_16, "iq2_s": Q8_0_16,
        "q4_1": Q8_1, "q5_1": Q8_1, "q4_k": Q8_1, "q5_k": Q8_1, "iq1_s": Q8_1, "q2_k": Q2_K, "q6_k": Q6_K}
# Byte offset of the fp16 d (and dmin / m after it, where the format has one) in each block.
D_OFFSET = {"q2_k": 80, "q3_k": 108, "q6_k": 208}
IQ1S_DELTA = 0.125  # ggml-common.h


@dataclass(frozen=True)
class Split:
    """A weight matrix [rows][k] as value = a + b (b one value per `group` values: the sub-block's offset),
    exactly, and as the device's loaders store it (a', b'). float64."""

    a: np.ndarray
    b: np.ndarray  # [rows][k / group]
    a_dev: np.ndarray
    b_dev: np.ndarray
    group: int

    @property
    def exact(self) -> np.ndarray:
        return self.a + np.repeat(self.b, self.group, axis=1)


def split(fmt: str, raw: np.ndarray, rows: int, k: int) -> Split:
    """The exact and the device's decomposition of `raw` [rows][bytes] (module docstring)."""
    from strata_bench.formats import get_format

    spec = get_format(fmt)
    blocks = spec.blocks(raw).reshape(rows, -1, spec.type_size)
    dot = DOTS[fmt]
    if not dot.group:
        a = _values(spec, blocks, rows, k)
        zeros = np.zeros((rows, k // 32))
        return Split(a, zeros, a, zeros, 32)
    return {"q4_1": _legacy_min, "q5_1": _legacy_min, "q4_k": _k_min, "q5_k": _k_min, "q2_k": _q2_k,
            "iq1_s": _iq1_s}[fmt](spec, blocks, rows, k)


def _values(spec, blocks: np.ndarray, rows: int, k: int) -> np.ndarray:
    return spec.dequantize(blocks.reshape(rows, -1)).astype(np.float64).reshape(rows, k)


def _with_zero(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The blocks with the fp16 at `offset` set to +0."""
    out = blocks.copy()
    out[..., offset:offset + 2] = 0
    return out


def _half(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The fp16 at `offset` of each block, float64 [rows][blocks]."""
    return blocks[..., offset:offset + 2].copy().view(F16)[..., 0].astype(np.float64)


def _rounded(scale: np.ndarray) -> np.ndarray:
    """fp16 round-to-nearest of exact products (the loaders' half2 products and __float2half)."""
    return scale.astype(np.float32).astype(F16).astype(np.float64)


def _codes(a: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The integer codes of a = scale * code (scale broadcast over its group; 0 where the scale is 0)."""
    q = np.divide(a, scale, out=np.zeros_like(a), where=scale != 0)
    return np.rint(q)


def _legacy_min(spec, blocks, rows, k) -> Split:
    """q4_1, q5_1: value d q + m; the tile keeps (d, m) as they are."""
    a = _values(spec, _with_zero(blocks, 2), rows, k)
    m = _half(blocks, 2)
    return Split(a, m, a, m, 32)


def _k_min(spec, blocks, rows, k) -> Split:
    """q4_K, q5_K: value d sc q - dmin m per 32 values; the tile keeps fp16(d sc), fp16(-dmin m)."""
    from gguf.quants import Q4_K

    sc, m = Q4_K.get_scale_min(np.ascontiguousarray(blocks[..., 4:16]).reshape(-1, 12))
    sc, m = sc.reshape(rows, -1).astype(np.float64), m.reshape(rows, -1).astype(np.float64)
    d = np.repeat(_half(blocks, 0), 8, axis=1) * sc  # [rows][k / 32], exact
    neg_min = -np.repeat(_half(blocks, 2), 8, axis=1) * m
    a = _values(spec, _with_zero(blocks, 2), rows, k)
    d32 = np.repeat(d, 32, axis=1)
    return Split(a, neg_min, _codes(a, d32) * np.repeat(_rounded(d), 32, axis=1), _rounded(neg_min), 32)


def _q2_k(spec, blocks, rows, k) -> Split:
    """q2_K: value d sc q - dmin m per 16 values; the tile keeps fp16(d sc), fp16(dmin m)."""
    at = D_OFFSET["q2_k"]  # d, then dmin
    scales = blocks[..., :16].reshape(rows, -1).astype(np.float64)
    d = np.repeat(_half(blocks, at), 16, axis=1) * (scales % 16)  # [rows][k / 16]
    neg_min = -np.repeat(_half(blocks, at + 2), 16, axis=1) * np.floor(scales / 16)
    a = _values(spec, _with_zero(blocks, at + 2), rows, k)
    d16 = np.repeat(d, 16, axis=1)
    return Split(a, neg_min, _codes(a, d16) * np.repeat(_rounded(d), 16, axis=1), -_rounded(-neg_min), 16)


def _iq1_s(spec, blocks, rows, k) -> Split:
    """iq1_s: value dl (g + delta), dl = d (2 s + 1), g in -1..1, delta +-1/8 per 32 values. The tile keeps the
    codes g + 1 and fp16(dl), fp16(dl (delta - 1)) (delta - 1 = -1 + 1/8 - (sign) 1/4)."""
    qh = np.ascontiguousarray(blocks[..., 34:50]).view(np.uint16).astype(np.int64)  # [rows][blocks][8]
    dl = (_half(blocks, 0)[..., None] * (2 * ((qh >> 12) & 7) + 1)).reshape(rows, -1)  # exact
    delta = np.where(qh & 0x8000, -IQ1S_DELTA, IQ1S_DELTA).reshape(rows, -1)
    w = _values(spec, blocks, rows, k)
    g = _grid(w, dl, delta)
    offset = dl * (delta - 1)  # exact in fp32 (dl has at most 15 significant bits)
    a = (g + 1) * np.repeat(dl, 32, axis=1)
    return Split(a, offset, (g + 1) * np.repeat(_rounded(dl), 32, axis=1), _rounded(offset), 32)


def _grid(w: np.ndarray, dl: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """iq1_s's grid values g (in -1..1) from w = dl (g + delta)."""
    dl32, delta32 = np.repeat(dl, 32, axis=1), np.repeat(delta, 32, axis=1)
    return np.where(dl32 != 0, np.rint(np.divide(w, dl32, out=np.zeros_like(w), where=dl32 != 0) - delta32), 0.0)


def activation_sums(x: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """(exact, as the dot reads it) sums of x [n][k] over each `group` values: fp16 of the raw sum (DS4's s,
    D2S6's s; the fp32 sum of codes times a power of two is exact for mmq's activations)."""
    n, k = x.shape
    exact = np.asarray(x, dtype=np.float64).reshape(n, k // group, group).sum(axis=2)
    return exact, _rounded(exact)


LOADERS = "src/ggml-cuda/mmq-load-tiles.cuh"
VEC_DOT = "src/ggml-cuda/mmq-vec-dot.cuh"
QUANTIZE = "src/ggml-cuda/quantize.cu"
COMMON = "src/ggml-common.h"
# The lines whose rounding the model emulates (spaces aside): the loaders' fp16 scales, the min terms, the
# activation sums. Every other scale is exact in fp32, whatever order the loader computes it in.
ARITHMETIC = (
    (LOADERS, "const half2 dm = bxi->dm * make_half2(1.0f, -1.0f);"),  # q4_K, q5_K
    (LOADERS, "x_dm[i*sram_stride + sizeof(int)*ksc + l] = dm*make_half2(sc8[l], m8[l]);"),
    (LOADERS, "const half2 x_dm_ik = __hmul2(bxi->dm, make_half2(sc_m & 0x0F, sc_m >> 4));"),  # q2_K
    (LOADERS, "const float d1q = __half2float(bxi->d) * (((qh >> 11) & 0x0E) + 1);"),  # iq1_s
    (LOADERS, "const float delta = -1.0f + IQ1S_DELTA - (qh & 0x8000) * (2.0f*IQ1S_DELTA/0x8000);"),
    (LOADERS, "x_ds[i*sram_stride + kqsx] = make_half2(d1q, d1q*delta);"),
    (COMMON, "#define IQ1S_DELTA 0.125f"),
    (VEC_DOT, "sum[(j0/tile_C::J + n)*tile_C::ne + l] += dmA[n][l/2][k01/QI8_1].y*dsB[l%2].y;"),
    (VEC_DOT, "sum[(j0/tile_C::J + n)*tile_C::ne + l] -= mA[n][l/2][k01/4 + 0]*sB[l%2].x;"),
    (QUANTIZE, "y[ib].ds4[iqs/32] = make_half2(d, sum);"),
    (QUANTIZE, "y[ib].d2s6[2 + iqs/16] = sum;"),
)
_MMA_CASE = re.compile(r"caseGGML_TYPE_(\w+):returnggml_cuda_mmq_util_funcs\(-1,ggml_cuda_mmq_load_tiles_\w+<[^>]*>,"
                       r"ggml_cuda_mmq_(vec_dot_\w+)<")


def tree_dots(tree) -> dict[str, str]:
    """format -> the dot ggml_cuda_mmq_get_util_funcs gives it with the MMA data layout (its last switch)."""
    from strata_bench.ggml.mmq import MMQ_CUH
    from strata_bench.ggml.tree import TYPE_NAMES, _uncommented, squash

    text = squash(_uncommented(tree.path(MMQ_CUH).read_text(errors="replace")))
    start = text.find("staticconstexpr__device__ggml_cuda_mmq_util_funcsggml_cuda_mmq_get_util_funcs()")
    body = text[start:text.find("ggml_cuda_mmq_get_vdr()", start)] if start >= 0 else ""
    marker = body.rfind("#endif//BLACKWELL_MMA_AVAILABLE")  # the MMA switch follows Blackwell's FP4 one
    body = body[marker:] if marker >= 0 else body
    by_name = {name: fmt for fmt, name in TYPE_NAMES.items()}
    return {by_name[m.group(1)]: m.group(2) for m in _MMA_CASE.finditer(body) if m.group(1) in by_name}


def lacking(tree, formats: tuple[str, ...], lines: bool = True) -> str | None:
    """None where the tree gives each of `formats` the dot the model bounds and (with `lines`) has the lines
    whose rounding family mmq's model emulates; else why not, naming the file and the dot or line."""
    from strata_bench.ggml.mmq import MMQ_CUH
    from strata_bench.ggml.tree import squash

    found = tree_dots(tree)
    for fmt in formats:
        if found.get(fmt) != DOTS[fmt].name:
            return (f"{MMQ_CUH}: {fmt}'s mul_mat_q dot is {found.get(fmt) or 'not found'}, not {DOTS[fmt].name}, "
                    "which family mmq's error model bounds (an unsupported ggml version?)")
    if not lines:
        return None
    texts = {s: squash(tree.path(s).read_text(errors="replace")) for s in {s for s, _ in ARITHMETIC}}
    line = next(((s, line) for s, line in ARITHMETIC if squash(line) not in texts[s]), None)
    if line is not None:
        return f"{line[0]} has no `{line[1]}`, which family mmq's error model bounds (an unsupported ggml version?)"
    return None
