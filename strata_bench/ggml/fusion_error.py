"""How ggml's kernels on the two fusion families (swiglu_q8, moe_combine) are judged against the families' own
float64 references: each family's per-element bounds recomputed with ggml's arithmetic in place of the
built-ins' (docs/GGML.md, "The fusion families"). ggml-cuda is built with -use_fast_math: expf is __expf,
a division is the approximate one (2 ulp), rsqrtf the approximate one (2 ulp), subnormal results flush to
zero; a product and a sum may contract to an fma, or not (either is covered).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

import numpy as np

from strata_bench.ggml.error import DIV_ULPS, EXPF_ULPS, SILU_LOST_BELOW, U32, ULP, LastCase
from strata_bench.numerics.bounds import fp16_half_ulp

APPROX_REL = 2 * ULP  # a 2-ulp operation (division, rsqrtf), relative to its result
# Above it __expf(-g) may flush to zero (ftz): all of the term, relative e^-g, then at most 2^-115, is lost.
EXP_FLUSH_ABOVE = 80.0


def swiglu_h_rel(g: np.ndarray) -> np.ndarray:
    """Relative error of ggml's fp32 h = (g / (1 + __expf(-g))) * u for exact fp32 g (unary.cu's gated
    kernel): __expf's relative error e reaches the denominator 1 + E as e E / (1 + E) = e sigmoid(-g); then
    the add, the 2-ulp division and the product. Below SILU_LOST_BELOW the division may give 0 (all lost)."""
    g = np.asarray(g, dtype=np.float64)
    with np.errstate(over="ignore"):
        weight = 1.0 / (1.0 + np.exp(g))  # sigmoid(-g): the share of __expf(-g) in the denominator
    expf = np.where(g > EXP_FLUSH_ABOVE, 1.0, (EXPF_ULPS[0] + EXPF_ULPS[1] * np.abs(g)) * ULP) * weight
    rel = 1.01 * (expf + U32 + DIV_ULPS * ULP + U32)  # 1.01: the products of these small terms
    return np.where(g < SILU_LOST_BELOW, 1.0, rel)


def fast_q8_1_value_error(amax: np.ndarray) -> np.ndarray:
    """|x - float(d16) q| for quantize.cu's quantize_q8_1 under -use_fast_math: d = amax / 127 and x / d are
    2-ulp divisions, so d is within 4u of amax / 127, |x / d| <= 127 (1 + 4u) is computed within 127 (4u +
    ...) <= 509 u of itself, and q = roundf() within 0.5 + 509 u of x / d; the fp16 d16 within half an fp16
    ulp of d, |q| <= 127 (numerics/bounds.q8_1_value_error's derivation with 2-ulp divisions)."""
    d = np.asarray(amax, dtype=np.float64) / 127.0 * (1.0 + APPROX_REL)
    return d * (0.5 + 509 * U32) + 127.0 * fp16_half_ulp(d)


def ggml_swiglu() -> Any:
    """swiglu_q8's SwigluArithmetic for ggml's gated kernel and quantize_q8_1."""
    from strata_bench.families.swiglu_q8 import SwigluArithmetic

    return SwigluArithmetic(swiglu_h_rel, fast_q8_1_value_error)


@dataclass(frozen=True)
class SwigluErrorModel:
    """cases/error_model.ErrorModel for ggml's SwiGLU + quantize_q8_1 on swiglu_q8's cases: each block of
    q:values and q:sums held to the family's own bound (swiglu_reference) computed with ggml's arithmetic,
    from the case's own gate and up."""

    judges_baseline: ClassVar[bool] = True  # absolute bounds: they hold wherever ggml runs
    _last: LastCase = field(default_factory=LastCase, compare=False, repr=False)  # the last case's bounds

    def applies(self, fmt: str) -> bool:
        return True  # every down type: the format only sets the rows' width

    def bounds(self, case: Any, host: Mapping[str, Any], exp: Any, baseline_err: float | None) -> np.ndarray:
        return self._bounds(case, host)[exp.output]

    def _bounds(self, case: Any, host: Mapping[str, Any]) -> dict[str, np.ndarray]:
        from strata_bench.families.swiglu_q8 import expected, swiglu_reference

        def bounds() -> dict[str, np.ndarray]:
            ref = swiglu_reference(host["gate"], host["up"], ggml_swiglu())
            return {e.output: e.tol for e in expected(ref)}

        # two references of one case's inputs: computed once for them
        return self._last.get((case, id(host["gate"])), bounds)

    def describe(self) -> str:
        return ("swiglu_q8's bounds with ggml's arithmetic: __expf and an approximate division in the SwiGLU, "
                "2-ulp divisions in quantize_q8_1")


# A result under 2^-126 flushes to zero (-use_fast_math's ftz): at most 2^-126 each, and an element's chain
# (K + 1 <= 16 roundings for c, fewer for R, x and y) flushes at most 16 of them.
FLUSH = 16 * 2.0 ** -126
WARP_LEVELS = 5  # a butterfly over 32 lanes


def ggml_norm(n: Any) -> Any:
    """moe_combine's NormArithmetic for ggml's chain (combine.py; `n` its Numbers): hc_post's c beta + R_in
    may round the product apart from the add; flushes; the sum of squares' deepest path is a thread's 2
    roundings a term over ceil(H / block) terms, then block_reduce's two butterflies; tmp / ncols and
    rsqrtf are 2-ulp operations."""
    from strata_bench.families.moe_combine import NormArithmetic
    from strata_bench.kernels.launch import ceil_div

    def depth(hidden: int) -> int:
        return 2 * ceil_div(hidden, n.norm_block(hidden)) + 2 * WARP_LEVELS

    return NormArithmetic(U32, FLUSH, depth, APPROX_REL, APPROX_REL)


@dataclass(frozen=True)
class CombineErrorModel:
    """cases/error_model.ErrorModel for ggml's chain on moe_combine's cases: each element of R_out and xn16 held
    to the family's own bound (moe_reference) computed with ggml's arithmetic (ggml_norm), from the case's own
    inputs. rs and xn16_lo are not judged: the chain does not compute them (Variant.omits)."""

    numbers: Any  # combine.Numbers of the tree: the norm's block, so the sum's depth
    judges_baseline: ClassVar[bool] = True  # absolute bounds: they hold wherever ggml runs
    _last: LastCase = field(default_factory=LastCase, compare=False, repr=False)  # the last case's bounds

    def applies(self, fmt: str) -> bool:
        return True  # moe_combine's one format (f32)

    def bounds(self, case: Any, host: Mapping[str, Any], exp: Any, baseline_err: float | None) -> np.ndarray:
        return self._bounds(case, host)[exp.output]

    def _bounds(self, case: Any, host: Mapping[str, Any]) -> dict[str, np.ndarray]:
        from strata_bench.families.moe_combine import MoeCombine, expected, moe_reference

        def bounds() -> dict[str, np.ndarray]:
            geo = MoeCombine.geometry(case)
            ref = moe_reference(host, geo["H"], geo["eps"], ggml_norm(self.numbers))
            return {e.output: e.tol for e in expected(ref, geo["ld"], geo["lo"])}

        # two references of one case's inputs: computed once for them
        return self._last.get((case, id(host["Y"])), bounds)

    def describe(self) -> str:
        return ("moe_combine's bounds with ggml's arithmetic: an unfused product in the residual update, flushed "
                "subnormals, its sum of squares' depth, an approximate division and rsqrtf")
