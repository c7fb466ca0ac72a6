"""swiglu_q8: h = silu(gate) * up quantized to q8_1 rows: two kernels (old) vs one fused kernel (new).

Kernels: kernels_src/swiglu_q8/swiglu_q8.cu (its ARITHMETIC CONTRACT says why every q8_1 byte is equal).
A case's `fmt` is the down projection's weight type, which fixes the row length granularity the down
mat-vec reads (64 for Q2_0, 32 for IQ4_NL and Q8_0); the widths are real MoE expert FFN sizes:
768 (Qwen3-30B-A3B, Q2_0 down), 1408 (Qwen1.5-MoE-A2.7B, IQ4_NL down), 1536 (SmolLM2, Q8_0 down).
Param `layout`: "split" (gate and up are two [T, F] arrays) or "concat" (one [T, 2F] array per row:
F gate values then F up values, as a fused gate/up GEMM over concatenated weight rows writes it).
Edge data: row 0 is all zero (every block quantizes to d = 0, q = 0); the last row has h = 3e4
(gate 3e4, up 1) at element 5 and h = -0 (gate -3e4: expf overflows, g / inf = -0) at element 40.

Float64 references (docs/ARITHMETIC_Q2WARP_FUSED.md, section C2), through the derived outputs of
`output_values` (the q8_1 bytes are not floats):
- "q:values" = float(d16) * q per element vs silu(g)*u in float64. Per block:
  8u*amax + eta + q8_1_value_error(amax*(1+8u) + eta), where 8u bounds the fp32 h (expf <= 2 ulp,
  then an add, a division and a multiply: 7u + O(u^2)), eta = 2^-120 (1 + |u|) covers expf's
  overflow and fp32 subnormals, and q8_1_value_error is d/2 (1 + 256u) + 127 halfulp16(d).
- "q:sums" = the fp16 s field vs sum of silu(g)*u in float64: halfulp16 + gamma_5 sum|h| (butterfly)
  + sum |h32 - h|.
Each block is checked against its own bound (every value of a block shares the block's), so the 3e4
block of the edge cases does not loosen the others.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from strata_bench.kit import (Q8_1_BYTES, Q8_1_VALUES, U32, U64, AbiArg, Case, Expected, Family, InputError, LaunchAbi,
                              Variant, ceil_div,
                              dequantize_q8_1, fp16_half_ulp, gamma, parse_data, q8_1_value_error, unpack_q8_1)

DOWN_WIDTHS = {"q2_0": 768, "iq4_nl": 1408, "q8_0": 1536}  # F per down type (see the docstring)
from strata_bench.kernels.constants import SWIGLU_GRANULE as GRANULE  # noqa: E402
LAYOUTS = ("split", "concat")
from strata_bench.kernels.constants import SWIGLU_WARPS as WARPS, SWIGLU_BLOCKS_PER_WARP as BLOCKS_PER_WARP  # noqa: E402
OUTLIER = 3.0e4
H_REL = 8 * U32  # relative bound of the fp32 h (see the docstring)
FIELDS = {0: "d", 1: "d", 2: "s", 3: "s"}


class SwigluQ8(Family):
    name = "swiglu_q8"
    ceiling = 'copy'
    sources = ("swiglu_q8/swiglu_q8.cu",)
    description = "silu(gate)*up -> q8_1 rows: FP32 h through memory + quantize vs one fused kernel, bitwise"

    # --- cases ------------------------------------------------------------------------------------
    def default_cases(self) -> Iterable[Case]:
        cases = [self.rows_case(fmt, t, "seed:1", lay) for t in (1, 37, 4113) for fmt in DOWN_WIDTHS for lay in LAYOUTS]
        cases += [self.rows_case(fmt, t, "edge:2", lay) for t in (1, 37) for fmt in DOWN_WIDTHS for lay in LAYOUTS]
        # The fused kernel's tail (docs/TAIL_PATHS.md): F/32 above is 24, 44 or 48, so a warp's 4 blocks are
        # always whole; 37 rows of 33 blocks leave the last warp 1 block (and the last CTA 5).
        cases.append(self.case("q8_0", 37, 1056, 1, "seed:3", layout="split"))
        return cases

    def bench_cases(self) -> Iterable[Case]:
        return [self.rows_case("q8_0", t, "seed:1", lay) for t in (4113, 16384) for lay in LAYOUTS]

    def rows_case(self, fmt: str, rows: int, data: str, layout: str) -> Case:
        """`rows` rows of F = DOWN_WIDTHS[fmt] values for a down projection of type `fmt`, in a layout."""
        return self.case(fmt, rows, DOWN_WIDTHS[fmt], 1, data, layout=layout)

    @staticmethod
    def _check(case: Case) -> str:
        layout = case.param("layout", "split")
        if layout not in LAYOUTS:
            raise InputError(f"swiglu_q8: layout must be split or concat, got {layout!r}")
        granule = GRANULE.get(case.fmt)
        if granule is None:
            raise InputError(f"swiglu_q8: down type must be one of {', '.join(GRANULE)}, got {case.fmt!r}")
        if case.cols <= 0 or case.cols % granule:
            raise InputError(f"swiglu_q8: F = {case.cols} is not a multiple of {granule} ({case.fmt} down rows)")
        return layout

    # --- data -------------------------------------------------------------------------------------
    def make_inputs(self, case: Case) -> dict[str, Any]:
        self._check(case)
        return _inputs(case.rows, case.cols, case.data)  # the same for both layouts: one draw, cached

    def _draw(self, rows: int, cols: int, data: str) -> dict[str, Any]:
        src = parse_data(data)
        if src.kind == "fixture":
            raise InputError("swiglu_q8: cases use seed:N or edge:N data (activations, not weights)")
        rng = np.random.default_rng(src.seed)
        gate = (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(2.0))
        up = rng.standard_normal((rows, cols), dtype=np.float32)
        if src.edge:
            gate[0] = 0.0
            up[0] = 0.0
            gate[-1, 5], up[-1, 5] = OUTLIER, 1.0
            gate[-1, 40], up[-1, 40] = -OUTLIER, 1.0
        return {"gate": gate, "up": up}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        layout = self._check(case)
        dev: dict[str, Any] = {"h": cupy.empty((case.rows, case.cols), dtype=cupy.float32)}  # old's workspace
        if layout == "split":
            dev["gate"], dev["up"] = cupy.asarray(host["gate"]), cupy.asarray(host["up"])
        else:
            dev["gate_up"] = cupy.asarray(np.concatenate([host["gate"], host["up"]], axis=1))
        return dev

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"q": cupy.empty((case.rows, case.cols // Q8_1_VALUES * Q8_1_BYTES), dtype=cupy.uint8)}

    # --- launch -----------------------------------------------------------------------------------
    def _old_kernels(self, source: str) -> list[str]:
        return ["swiglu_h_f32", "quantize_rows_q8_1"]

    def _new_kernels(self, source: str) -> list[str]:
        return ["swiglu_q8_1_fused"]

    @staticmethod
    def _gate_up(case: Case, dev: Mapping[str, Any]) -> tuple[Any, Any, int]:
        if "gate_up" in dev:
            both = dev["gate_up"]
            return both, both[:, case.cols:], 2 * case.cols  # views: the kernel gets their first element
        return dev["gate"], dev["up"], case.cols

    def _launch_old(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        gate, up, ld = self._gate_up(case, dev)
        t, f = np.int32(case.rows), np.int32(case.cols)
        blocks = case.rows * case.cols // Q8_1_VALUES
        kernels.get("swiglu_h_f32")((ceil_div(case.rows * case.cols, 256),), (256,),
                                    (gate, up, np.int64(ld), t, f, dev["h"]), stream=stream)
        kernels.get("quantize_rows_q8_1")((ceil_div(blocks, WARPS),), (32 * WARPS,),
                                          (dev["h"], t, f, outs["q"]), stream=stream)

    def _launch_new(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        gate, up, ld = self._gate_up(case, dev)
        t, f = np.int32(case.rows), np.int32(case.cols)
        blocks = case.rows * case.cols // Q8_1_VALUES
        kernels.get("swiglu_q8_1_fused")((ceil_div(blocks, WARPS * BLOCKS_PER_WARP),), (32 * WARPS,),
                                         (gate, up, np.int64(ld), t, f, outs["q"]), stream=stream)

    variants = (
        Variant("old", _old_kernels, _launch_old, "swiglu_h_f32 writes fp32 h, quantize_rows_q8_1 reads it back"),
        Variant("new", _new_kernels, _launch_new, "one fused kernel: h stays in registers"),
    )

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "swiglu_q8"): one or several launches."""
        return SWIGLU_Q8_ABI

    # --- reference --------------------------------------------------------------------------------
    def output_values(self, case: Case, name: str, outputs: Mapping[str, Any]) -> np.ndarray:
        """Float64 values of a derived output: "q:values" (d16 * q) or "q:sums" (the s fields)."""
        if name == "q:values":
            return dequantize_q8_1(outputs["q"])
        if name == "q:sums":
            return unpack_q8_1(outputs["q"])[1]
        return np.asarray(outputs[name], dtype=np.float64)

    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        cached = _inputs(case.rows, case.cols, case.data)
        if host is cached:
            ref = _reference(case.rows, case.cols, case.data)
        else:
            ref = swiglu_reference(host["gate"], host["up"])
        return expected(ref)

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        row, col = index
        if output == "q":
            block, byte = divmod(col, Q8_1_BYTES)
            field = FIELDS.get(byte, f"qs[{byte - 4}]")
            return f"row {row}, q8_1 block {block} (inputs {32 * block}..{32 * block + 31}), field {field}"
        return f"row {row}, element {col}"

    def bytes_moved(self, case: Case) -> int:
        return case.rows * case.cols * 4 * 2 + case.rows * case.cols // Q8_1_VALUES * Q8_1_BYTES


# --- the launch ABI of TOML variants (docs/ABI.md) ------------------------------------------------------
def _abi_fields(case: Case) -> dict[str, int]:
    ld = 2 * case.cols if SwigluQ8._check(case) == "concat" else case.cols
    return {"rows": case.rows, "cols": case.cols, "ld": ld, "blocks": case.rows * case.cols // Q8_1_VALUES}


SWIGLU_Q8_ABI = LaunchAbi(
    family="swiglu_q8",
    args=(
        AbiArg("gate", "const float*", "[rows][cols] float32 at row stride `ld` floats (layout split: ld = cols; "
                                       "concat: the first half of [rows][2 cols] rows, ld = 2 cols)",
               lambda c, d, o: SwigluQ8._gate_up(c, d)[0]),
        AbiArg("up", "const float*", "[rows][cols] float32 at row stride `ld` (concat: gate + cols)",
               lambda c, d, o: SwigluQ8._gate_up(c, d)[1]),
        AbiArg("ld", "long long", "floats from one gate (and up) row to the next",
               lambda c, d, o: np.int64(SwigluQ8._gate_up(c, d)[2])),
        AbiArg("rows", "int", "rows (T)", lambda c, d, o: np.int32(c.rows)),
        AbiArg("cols", "int", "values per row (F, a multiple of the down type's block)",
               lambda c, d, o: np.int32(c.cols)),
        AbiArg("h", "float*", "[rows][cols] float32 workspace, contiguous (what a launch may leave for the next)",
               lambda c, d, o: d["h"]),
        AbiArg("q", "block_q8_1*", "[rows][cols / 32] q8_1 blocks (36 bytes), contiguous; every byte written",
               lambda c, d, o: o["q"]),
    ),
    field_names=("rows", "cols", "ld", "blocks"),
    fields=_abi_fields,
    placeholder_sets=({},),
    placeholders=lambda case: {},
    baseline="old",
    writes="q: every byte of rows x cols/32 q8_1 blocks of silu(gate) * up; bitwise equal to old "
           "(swiglu_q8.cu's ARITHMETIC CONTRACT)",
)


@functools.lru_cache(maxsize=2)
def _inputs(rows: int, cols: int, data: str) -> dict[str, Any]:
    inputs = SwigluQ8()._draw(rows, cols, data)
    for arr in inputs.values():
        arr.setflags(write=False)  # shared by the split and concat cases
    return inputs


@functools.lru_cache(maxsize=2)
def _reference(rows: int, cols: int, data: str) -> dict[str, Any]:
    host = _inputs(rows, cols, data)
    return swiglu_reference(host["gate"], host["up"])


def expected(ref: Mapping[str, Any]) -> list[Expected]:
    """The references of a case from swiglu_reference's result (the family's, or another arithmetic's)."""
    return [
        Expected("q:values", ref["h"], np.repeat(ref["bound_values"], Q8_1_VALUES, axis=-1),
                 label="f64 silu(g)*u",
                 why="8u|h| + eta (fp32 h) + d/2(1+256u) + 127 halfulp16(d) (q8_1 rounding), per block"),
        Expected("q:sums", ref["sums"], ref["bound_sums"], label="f64 block sums",
                 why="halfulp16(s) + gamma_5 sum|h| (butterfly) + sum|h32 - h|, per block"),
    ]


@dataclass(frozen=True)
class SwigluArithmetic:
    """What the bounds take from the device's arithmetic (another one's, a foreign variant's error model):
    - h_rel(g): relative error of the fp32 h = silu(g) * u for the float64 gate values g (a float or an
      array of g's shape; H_REL for swiglu_q8.cu's expf, IEEE division and product);
    - value_error(amax): |x - float(d16) q| of a q8_1 block quantized from fp32 values of max |x| = amax."""

    h_rel: Callable[[np.ndarray], Any]
    value_error: Callable[[np.ndarray], np.ndarray]


BUILT_IN = SwigluArithmetic(lambda g: H_REL, q8_1_value_error)


def swiglu_reference(gate: np.ndarray, up: np.ndarray, arithmetic: SwigluArithmetic = BUILT_IN) -> dict[str, Any]:
    """silu(g)*u in float64, block sums, the per-block bounds (rows, blocks) of the values and the sums
    (bound_values, bound_sums) and the largest of each (tol_values, tol_sums), for `arithmetic`."""
    g = gate.astype(np.float64)
    u = up.astype(np.float64)
    with np.errstate(over="ignore"):
        h = g / (1.0 + np.exp(-g)) * u
    eta = 2.0 ** -120 * (1.0 + np.abs(u))  # expf overflow (h32 = -0) and fp32 subnormal slack
    err_h = (arithmetic.h_rel(g) + 4 * U64) * np.abs(h) + eta  # |h32 - h| per element, plus float64's own error
    blocks = h.reshape(h.shape[0], -1, Q8_1_VALUES)
    err_blocks = err_h.reshape(blocks.shape)
    amax = np.abs(blocks).max(axis=-1)
    amax32 = amax + err_blocks.max(axis=-1)  # a bound on the fp32 block maximum
    tol_values = err_blocks.max(axis=-1) + arithmetic.value_error(amax32)
    sums = blocks.sum(axis=-1)
    abs_h32 = (np.abs(blocks) + err_blocks).sum(axis=-1)
    err_sum32 = float(gamma(5)) * abs_h32 + err_blocks.sum(axis=-1) + 32 * U64 * np.abs(blocks).sum(axis=-1)
    tol_sums = fp16_half_ulp(np.abs(sums) + err_sum32) + err_sum32
    return {"h": h, "sums": sums, "bound_values": tol_values, "bound_sums": tol_sums,
            "tol_values": float(tol_values.max()), "tol_sums": float(tol_sums.max())}
