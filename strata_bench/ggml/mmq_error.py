"""How ggml's mul_mat_q with expert ids is judged against pfgemm's float64 references (exact weights times the
raw fp16 activations; docs/GGML.md, "The prompt-expert GEMM"). ggml computes each output from the
activations' 8-bit quantization, so its error is mostly that quantization's, which the host knows exactly:

- quantize_mmq_q8_1 (D4 layout: one fp32 scale a 32-value chunk): amax, d_inv = 127/amax, q = roundf(x d_inv),
  d = 1/d_inv, under -use_fast_math (approximate division and reciprocal, 2 ulp each). The host quantizes with
  D = amax/127 exactly; the device's d is within 2^-20 of D (mmq_family.SCALE_DEVIATION), and its x d_inv
  within 2^-21 |x/D| of x/D, so its code is the host's except where x/D lies that close to a tie of roundf:
  there it may be one more or one less (`step` holds D at those values, else 0);
- the int8 dots are exact, then mmq's bound: a few fp32 roundings a term and fp32 sums in ggml's order over
  |x^| |w| (mmq_family.mmq_bound; 3 roundings a term for the dot of two 16-value halves, iq2_s's).
Each output's bound: |sum_k w_k (x^_k - x_k)| (the host's quantization error, exact up to float64's own
rounding) + 1.01 sum step |w| + mmq_bound(sum (|x^| + step) |w|) + float64's K 2^-52 of both sums.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from strata_bench.ggml.error import PerFormatModel

CHUNK = 32  # values a q8_1 scale covers in the D4 layout
TIE_WINDOW = 2.0 ** -21  # |device x d_inv - x/D| / |x/D|: d_inv's 2 ulp (2^-22), the product's rounding, float64
F64_REL = 2.0 ** -52  # a float64 dot of K terms errs by at most K 2^-53 of its |terms|: twice that, for two of them


@dataclass(frozen=True)
class Quantized:
    """Activations as quantize_mmq_q8_1 (D4) gives them, from the host's exact arithmetic."""

    values: np.ndarray  # x^ = D q, float64 [rows][k]
    step: np.ndarray  # D where the device's code may differ from the host's by one, else 0


def q8_1_mmq(x: np.ndarray) -> Quantized:
    """quantize_mmq_q8_1's values for rows of fp16 or fp32 values [n][k] (k a multiple of 32); an all-zero
    chunk is zeros (the device's 0 * inf gives a NaN code, which the conversion to int8 makes 0)."""
    n, k = x.shape
    c = np.asarray(x, dtype=np.float64).reshape(n, k // CHUNK, CHUNK)
    amax = np.abs(c).max(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(amax > 0, c * 127.0 / amax, 0.0)  # x/D, one float64 rounding
    q = np.copysign(np.floor(np.abs(r) + 0.5), r)  # roundf: half away from zero
    near_tie = np.abs(np.abs(r) - np.floor(np.abs(r)) - 0.5) <= TIE_WINDOW * np.abs(r)
    d = amax / 127.0
    return Quantized((d * q).reshape(n, k), np.where(near_tie, d, 0.0).reshape(n, k))


def expert_bound(fmt: str, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """[tokens][rows]: the bound of ggml's |Y - x w^T| for one expert's tokens x [tokens][k] and its exact
    weights w [rows][k] (module docstring)."""
    from strata_bench.ggml.mmq_dots import DOTS
    from strata_bench.ggml.mmq_family import mmq_bound

    k = x.shape[1]
    quant = q8_1_mmq(x)
    aw = np.abs(w).T
    signed = np.abs((quant.values - x) @ w.T)
    ambiguous = quant.step @ aw
    magnitude = (np.abs(quant.values) + quant.step) @ aw
    own = k * F64_REL * (np.abs(x) @ aw + magnitude)
    return signed + 1.01 * ambiguous + mmq_bound(magnitude, k, DOTS[fmt].term_roundings, DOTS[fmt].adds) + own


def pfgemm_bound(fmt: str, host: Mapping[str, Any], rows: int, k: int) -> np.ndarray:
    """[T][N]: expert_bound for every expert's tokens of one pfgemm case, from its host inputs."""
    from strata_bench.families.pfgemm import expert_operands

    out = np.zeros((int(host["offsets"][-1]), rows), dtype=np.float64)
    for t0, t1, w, x in expert_operands(fmt, host["w"], host["x"], host["offsets"], rows, k):
        out[t0:t1] = expert_bound(fmt, w, x)
    return out


@dataclass(frozen=True)
class MmidErrorModel(PerFormatModel):
    """cases/error_model.ErrorModel for ggml's mul_mat_q with ids on pfgemm's cases of `formats`: each output
    held to its own bound from the case's own activations and weights (pfgemm_bound), not the family's (which
    bounds fp16 weights and tensor-core sums, neither of them ggml's)."""

    def bounds(self, case: Any, host: Mapping[str, Any], exp: Any, baseline_err: float | None) -> np.ndarray:
        # ggml and ggml_b are judged against one case's inputs in turn: computed once for both.
        key = (case, id(host["x"]))
        return self._last.get(key, lambda: pfgemm_bound(case.fmt, host, case.rows, case.cols))

    def describe(self) -> str:
        return ("ggml's q8_1 activations (the case's own quantization error, a code either way near a tie), "
                "exact int8 dots, fp32 roundings and sums in ggml's order (docs/GGML.md)")
