"""How ggml's mat-vec is judged against the float64 references where its arithmetic is not the built-ins'
(the formats both have): the family's own bound for the output plus what ggml's arithmetic adds, computed
from the case's own weights and q8_1 activations (docs/GGML.md, "Arithmetic"):

- truncation: iq2_xxs (`sumi * ls / 8`), iq2_xs and iq2_s (`(sumi0 ls0 + sumi1 ls1 + (sumi0 + sumi1) / 2) / 4`)
  and iq3_xxs (`(ls sumi + sumi / 2) / 2`) divide the chunk's integer dot with truncation before it is
  scaled by d = d_w d_x (exact in fp32): under 2 units of |d_w d_x| per 32-value chunk;
- iq1_s's delta term uses the q8_1 block's s (the fp16 sum of the raw activations) in place of d_x times
  the sum of the codes: d_w (2 ls + 1) |delta| |s - d_x sum q| per chunk, with 2 ls + 1 <= 15 and
  |delta| <= 1.125, so at most 16.875 |d_w| |s - d_x sum q|;
- fp32 rounding in another order: each chunk's term is rounded up to 4 times, summed per thread, then over
  the warps through shared memory and by a butterfly: gamma_m sum |w| |x_q| with m = 4 + chunks + 8 + 5.
Each output is held to its own bound: the family's for it plus ggml's allowance for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping

import numpy as np

TRUNCATING = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs")
TRUNCATION_UNITS = 2.0
RAW_SUM = {"iq1_s": 15 * 1.125}  # (2 ls + 1) max x |delta| max
U32 = 2.0 ** -24
EXTRA_ROUNDINGS = 4 + 8 + 5  # per term, over the warps, the butterfly


@dataclass
class LastCase:
    """The value computed for the last key, kept for the next call with that key: a family checks several
    references (and ggml and ggml_b each) against one case's inputs in turn, so an error model's per-case
    bounds are computed once for them. One value at most is held (the cases go one by one)."""

    _key: Any = None
    _value: Any = None
    _held: bool = False

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        if not self._held or self._key != key:
            self._key, self._value, self._held = key, compute(), True
        return self._value


@dataclass(frozen=True)
class PerFormatModel:
    """What ggml's per-format error models share: the formats they judge, absolute bounds (so they judge the
    baseline too), and the last case's bounds kept for its next reference (LastCase)."""

    formats: tuple[str, ...]
    judges_baseline: ClassVar[bool] = True  # absolute bounds: they hold wherever ggml runs
    _last: LastCase = field(default_factory=LastCase, compare=False, repr=False)  # the last case's bounds

    def applies(self, fmt: str) -> bool:
        return fmt in self.formats


@dataclass(frozen=True)
class GgmlErrorModel(PerFormatModel):
    """cases/error_model.ErrorModel for ggml's mul_mat_vec_q over the formats in `formats`: each output is held
    to its own bound, the family's plus ggml's allowance for it, from the case's own host inputs."""

    def bounds(self, case: Any, host: Mapping[str, Any], exp: Any, baseline_err: float | None) -> np.ndarray:
        """The per-output bound: `exp`'s (the family's) plus ggml's allowance, from the case's inputs."""
        own = np.broadcast_to(np.asarray(exp.tol, dtype=np.float64), np.shape(exp.ref))
        return own + self._allowance(case, host).reshape(own.shape)

    def _allowance(self, case: Any, host: Mapping[str, Any]) -> np.ndarray:
        # mmvq checks two references against one case's inputs: computed once for them.
        key = (case, id(host["raw"]))
        return self._last.get(key, lambda: allowance(case.fmt, host["raw"], host["act"], case.cols))

    def describe(self) -> str:
        return "the family's bound + ggml's truncations, iq1_s's raw sum and fp32 order (docs/GGML.md)"


NEGATIVE_ZERO_BITS = 0x80000000
# ggml's dequantize_q4_0 forms d * q + (-8 d), which is +0.0 for the code 8; gguf-py's d * (q - 8) is -0.0 where
# d < 0. The same value: only the bits of that zero differ (docs/GGML.md, "q4_0's zero").
ZERO_SIGN_FORMATS = ("q4_0",)


@dataclass(frozen=True)
class ZeroSignModel:
    """ggml's dequantization where it differs from gguf-py only in a zero's sign (`formats`): the reference of
    the float32 bits allows a zero of either sign where gguf-py's value is a zero, and nothing else; the value
    references keep their tolerance of 0, so any other difference still fails."""

    formats: tuple[str, ...]
    bits_label: str = "gguf f32 bits"
    judges_baseline: ClassVar[bool] = True  # ggml is the baseline where no built-in runs the format

    def applies(self, fmt: str) -> bool:
        return fmt in self.formats

    def bounds(self, case: Any, host: Any, exp: Any, baseline_err: float | None) -> Any:
        if exp.label != self.bits_label:
            return exp.tol
        ref = np.asarray(exp.ref)
        own = np.broadcast_to(np.asarray(exp.tol, dtype=np.float64), ref.shape)
        # The two zeros' bit patterns are 0 and 2^31 apart: allow exactly that where the reference is a zero.
        return np.where((ref == 0) | (ref == NEGATIVE_ZERO_BITS), float(NEGATIVE_ZERO_BITS), own)

    def describe(self) -> str:
        return "gguf-py's float32 bits, a zero's sign aside (values compared exactly)"

    @property
    def note(self) -> str:
        return (f"ggml's {', '.join(self.formats)} dequantization stores +0.0 where gguf-py stores -0.0 "
                "(d*q + (-8d) against d*(q-8), d < 0): the sign of a zero is not compared, every value is")


def allowance(fmt: str, raw: np.ndarray, act: np.ndarray, cols: int) -> np.ndarray:
    """(ncols, rows): what ggml's arithmetic may add to each output's error, over the family's bound."""
    from strata_bench.formats import get_format
    from strata_bench.numerics.q8_1 import dequantize_q8_1, unpack_q8_1

    spec = get_format(fmt)
    rows, nchunks = raw.shape[0], cols // 32
    act = np.asarray(act).reshape(act.shape[0], -1)
    w = np.abs(spec.dequantize(raw.reshape(rows, -1)).astype(np.float64).reshape(rows, cols))
    xq = np.abs(np.stack([dequantize_q8_1(a) for a in act]).reshape(act.shape[0], cols))
    out = (EXTRA_ROUNDINGS + nchunks) * U32 * 1.01 * (xq @ w.T)
    if fmt in TRUNCATING or fmt in RAW_SUM:
        d_w = np.abs(_block_d(raw, spec.type_size, spec.block_size, cols))  # (rows, nchunks)
        d_x, s, codes = _act_chunks(act, nchunks, unpack_q8_1)  # (ncols, nchunks) each
        if fmt in TRUNCATING:
            out += TRUNCATION_UNITS * (np.abs(d_x) @ d_w.T)
        else:
            out += RAW_SUM[fmt] * (np.abs(s - d_x * codes) @ d_w.T)
    return out


def _block_d(raw: np.ndarray, type_size: int, block_size: int, cols: int) -> np.ndarray:
    """Each 32-value chunk's block scale d (the fp16 at the block's first two bytes), (rows, chunks)."""
    rows = raw.shape[0]
    blocks = np.ascontiguousarray(raw.reshape(rows, -1)[:, :cols // block_size * type_size])
    d = blocks.reshape(rows, -1, type_size)[:, :, :2].copy().view(np.float16)[..., 0].astype(np.float64)
    return np.repeat(d, block_size // 32, axis=1)


def _act_chunks(act: np.ndarray, nchunks: int, unpack: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    d, s, q = [], [], []
    for column in act:
        cd, cs, cq = unpack(column.reshape(-1)[:nchunks * 36])
        d.append(np.asarray(cd, dtype=np.float64))
        s.append(np.asarray(cs, dtype=np.float64))
        q.append(np.asarray(cq, dtype=np.int64).reshape(nchunks, 32).sum(axis=1))
    return np.array(d), np.array(s), np.array(q, dtype=np.float64)


# ggml's SwiGLU in the fused gate/up launch, `x / (1.0f + expf(-x))` under -use_fast_math: expf is __expf, at
# most 2 + floor(1.173 |x|) ulp (CUDA C++ Programming Guide, intrinsic functions), the division the approximate
# one, 2 ulp where the denominator is under 2^126; an ulp of a float is at most 2^-23 of it.
EXPF_ULPS = (2.0, 1.173)
DIV_ULPS = 2.0
ULP = 2.0 ** -23
# Below it 1 + __expf(-g) passes 2^126 and the approximate division gives 0: all of silu(g) (under 1e-33) lost.
SILU_LOST_BELOW = -80.0


def fast_silu_rel(g: np.ndarray, bg: np.ndarray) -> np.ndarray:
    """Relative error of ggml's silu(g_dev) * up for |g_dev - g| <= bg: __expf's ulps at |g| + bg, the add,
    the division and the product (1.01 for the products of these small terms)."""
    mag = np.abs(g) + bg
    rel = 1.01 * ((EXPF_ULPS[0] + EXPF_ULPS[1] * mag) * ULP + U32 + DIV_ULPS * ULP + U32)
    return np.where(g - bg < SILU_LOST_BELOW, 1.0, rel)


def down_rel(k: int) -> float:
    """ggml's extra rounding of a down dot of k values over |q8_1(H)| |down| (allowance's first term)."""
    return (EXTRA_ROUNDINGS + k // 32) * U32 * 1.01


def moe_allowance() -> Any:
    """grouped's ChainAllowance for ggml's MoE mat-vec: `allowance` on each gate and up output, the fast-math
    SwiGLU, and the down dot's rounding (the down formats it runs add no truncation or raw-sum term)."""
    from strata_bench.families.grouped import ChainAllowance

    return ChainAllowance(matvec=allowance, silu_rel=fast_silu_rel, down_rel=down_rel)


@dataclass(frozen=True)
class MoeErrorModel(PerFormatModel):
    """cases/error_model.ErrorModel for ggml's MoE mat-vec on grouped's cases of the gate formats in `formats`:
    each element of H and Y is held to grouped's own bound recomputed with ggml's allowance (moe_allowance)
    through the SwiGLU and the down product, from the case's own host inputs."""

    def bounds(self, case: Any, host: Mapping[str, Any], exp: Any, baseline_err: float | None) -> np.ndarray:
        from strata_bench.families.grouped import CHAIN_LABELS

        chain = next(c for c, label in CHAIN_LABELS.items() if label == exp.label)
        return self._widened(case, host)[f"t{exp.output}_{chain}"]

    def _widened(self, case: Any, host: Mapping[str, Any]) -> dict[str, np.ndarray]:
        from strata_bench.families.grouped import grouped_reference

        # grouped checks four references against one case's inputs: computed once for them.
        key = (case, id(host["x"]))
        return self._last.get(key, lambda: grouped_reference(host, case.rows, case.cols, moe_allowance()))

    def describe(self) -> str:
        return ("grouped's bounds with ggml's arithmetic: its mat-vec allowance on gate, up and down, and a "
                "fast-math SwiGLU (__expf, approximate division)")
