"""q2warp: Q2_0 mat-vec over q8_1 activations, 1 to 4 columns: the exact layout (old) vs rows per warp (new).

Kernels: kernels_src/q2warp/q2warp.cu (its ARITHMETIC CONTRACT says why the variants are bitwise equal).
Output y is float32 (ncols, rows). Activations are seeded standard-normal columns quantized on the host
to q8_1 exactly as the device's quantize_q8_1_lane would (the kit's quantize_q8_1).

Float64 references and their tolerances (docs/ARITHMETIC_Q2WARP_FUSED.md, section A, derives them):
- "f64(q8_1 acts)": y = sum_h d_w,h * d_a,h * S_h, exact products summed in float64. The kernel's
  fp32 result differs by at most gamma_{m+9} * sum_h |d_w d_a S_h| (m = ceil(2nb/128) fused
  multiply-adds per thread chain, 3 cross-warp adds, 5 butterfly adds, 1 rounding of d_w*d_a), plus
  the float64 summation's own gamma64_{2nb}.
- "f64(raw acts)": y = W x with the exact weights and the unquantized activations. Adds the q8_1
  rounding of the activations, sum_j |w_j| |x_j - xq_j|, evaluated exactly from the case's inputs
  (a priori <= sum_j |w_j| (d_j (0.5 + 128u) + 127 * halfulp16(d_j))), and float64's gamma64_K.
Each output is checked against its own bound (the tolerance is the array of per-output bounds).
"""
from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any, Iterable, Mapping

import numpy as np

from strata_bench.kit import (Q8_1_BYTES, U64, AbiArg, Case, Expected, Family, FixtureRef, InputError, LaunchAbi,
                              Variant,
                              allow_dynamic_shared, ceil_div, dequantize_q8_1, gamma, parse_data, quantize_q8_1,
                              unpack_q8_1)

from strata_bench.kernels.constants import BLOCK_SHAPES, Q2WARP_STATIC_SHARED_BYTES
BLOCK_VALUES, BLOCK_BYTES = BLOCK_SHAPES["q2_0"]
GRANULE_BYTES = 16  # q2warp_new reads its buffers as aligned 16-byte granules (q2warp.cu, MEMORY CONTRACT)
from strata_bench.kernels.constants import Q2WARP_OLD_THREADS as OLD_THREADS  # noqa: E402
from strata_bench.kernels.constants import Q2WARP_NEW_WARPS as NEW_WARPS  # noqa: E402
from strata_bench.kernels.constants import Q2WARP_ROWS_PER_WARP as ROWS_PER_WARP  # noqa: E402
REF_CHUNK_ROWS = 2048  # rows per float64 reference chunk (bounds host memory at the 12288 x 2560 shape)
ACT_SEED_OFFSET = 7919  # activations get their own stream, so weights and activations are independent
OUTLIER = 3.0e4
FIXTURE_FORMAT_NOTE = "fixture rows are requantized to Q2_0 (Q2_0.quantize) and tiled to the case's rows"


class Q2Warp(Family):
    name = "q2warp"
    sources = ("q2warp/q2warp.cu",)
    description = "Q2_0 x q8_1 mat-vec, 1-4 columns: exact layout (4 warps/row) vs 4 rows/warp, bitwise"

    # --- cases ------------------------------------------------------------------------------------
    def default_cases(self) -> Iterable[Case]:
        cases = [self.case("q2_0", 12288, 2560, n, "seed:1") for n in (1, 2, 3, 4)]  # the attention projection
        # Uneven shapes: 39 blocks (78 half-blocks: chunk 2 partial, chunk 3 idle), odd row strides
        # (702 bytes: rows alternate 2- and 4-byte alignment), rows not a multiple of 4 or 16.
        cases += [self.case("q2_0", 1001, 2496, n, "seed:2") for n in (1, 2, 3, 4)]
        cases += [
            self.case("q2_0", 1001, 2496, 4, "edge:3"),  # zero, subnormal, 65504 scales; zero and 3e4 activations
            self.case("q2_0", 13, 8320, 3, "seed:4"),    # 260 half-blocks: 9 groups, the last of 4 half-blocks
            self.case("q2_0", 7, 64, 2, "seed:5"),       # one block per row: two lanes of one warp do everything
            self.case("q2_0", 6, 192, 1, "edge:6"),      # 3 blocks per row; 6 rows: the second warp has 2 of its 4 rows
        ]
        cases += self.fixture_cases(FixtureRef("smollm2-ffn_down.q8_0", "q8_0", 64, 1536))
        return cases

    def fixture_cases(self, fixture: FixtureRef, ncols: tuple[int, ...] | None = None,
                      fmt: str | None = None) -> list[Case]:
        """Q8_0 (or Q2_0) rows requantized to Q2_0 by Q2_0.quantize, x 2 columns (or --cols, 1 to 4)."""
        if fixture.fmt not in ("q8_0", "q2_0") or (fmt or "q2_0") != "q2_0" or fixture.cols % BLOCK_VALUES:
            return []
        for n in ncols or ():
            if not 1 <= n <= 4:
                raise InputError(f"q2warp: --cols {n}: 1 to 4 columns")
        return [self.case("q2_0", fixture.rows, fixture.cols, n, fixture.data) for n in ncols or (2,)]

    def bench_cases(self) -> Iterable[Case]:
        shapes = ((12288, 2560), (131072, 8192))  # attention projection; PEER.md's DRAM shape
        return [self.case("q2_0", r, k, n, "seed:1") for r, k in shapes for n in (1, 2, 3, 4)]

    def related_cases(self, case: Case) -> list[tuple[Case, str, Any]]:
        """Column 0 of an n-column call equals the 1-column call (column 0 is the same activation)."""
        if case.ncols == 1 or case.rows * case.cols > 64 * 1024 * 1024:
            return []
        return [(replace(case, ncols=1), "y", lambda outs: outs["y"][0:1])]

    # --- data -------------------------------------------------------------------------------------
    @staticmethod
    def _check_shape(case: Case) -> None:
        if case.cols % BLOCK_VALUES or case.cols <= 0:
            raise InputError(f"q2warp: inputs per row must be a positive multiple of 64, got {case.cols}")
        if not 1 <= case.ncols <= 4:
            raise InputError(f"q2warp: 1 to 4 columns, got {case.ncols}")

    def make_inputs(self, case: Case) -> dict[str, Any]:
        self._check_shape(case)
        src = parse_data(case.data)
        weights = _weights(case, src)
        x = _activations(case.cols, case.ncols, src.seed if src.kind != "fixture" else 0, edge=src.edge)
        return {"w": weights, "x": x, "act": quantize_q8_1(x)}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"w": _granule_padded(cupy, host["w"]), "act": _granule_padded(cupy, host["act"])}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"y": cupy.empty((case.ncols, case.rows), dtype=cupy.float32)}

    # --- launch -----------------------------------------------------------------------------------
    def _old_kernels(self, source: str) -> list[str]:
        return [f"q2warp_old<{n}>" for n in (1, 2, 3, 4)]

    def _new_kernels(self, source: str) -> list[str]:
        return [f"q2warp_new<{n}, {NEW_WARPS}>" for n in (1, 2, 3, 4)]

    @staticmethod
    def _args(case: Case, dev: Mapping[str, Any], outs: Mapping[str, Any]) -> tuple[Any, ...]:
        return (dev["w"], dev["act"], outs["y"], np.int32(case.rows), np.int32(case.cols // BLOCK_VALUES))

    def _launch_old(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        fn = kernels.get(f"q2warp_old<{case.ncols}>")
        fn((case.rows,), (OLD_THREADS,), self._args(case, dev, outs), stream=stream)

    def _launch_new(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        fn = kernels.get(f"q2warp_new<{case.ncols}, {NEW_WARPS}>")
        shared = new_kernel_shared_bytes(dev["act"].data.ptr, case.ncols, case.cols // BLOCK_VALUES)
        allow_dynamic_shared(fn, shared, static_bytes=Q2WARP_STATIC_SHARED_BYTES)
        rows_per_cta = ROWS_PER_WARP * NEW_WARPS
        fn((ceil_div(case.rows, rows_per_cta),), (32 * NEW_WARPS,), self._args(case, dev, outs), shared_mem=shared,
           stream=stream)

    variants = (
        Variant("old", _old_kernels, _launch_old, "the exact layout: 4 warps per row"),
        Variant("new", _new_kernels, _launch_new, "4 rows per warp, activations staged in shared memory"),
    )

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "q2warp")."""
        return Q2WARP_ABI

    # --- reference ----------------------------------------------------------------------------------
    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        ref = _reference_for_columns(case, host)
        # Each output against its own bound (the per-output bounds q2_reference derives).
        return [
            Expected("y", ref["y_q"], ref["bound_q"], label="f64(q8_1 acts)",
                     why="gamma_{m+9} * sum_h |d_w d_a S_h| (fp32 fma chain, 3+5 adds, d_w*d_a) + gamma64"),
            Expected("y", ref["y_raw"], ref["bound_raw"], label="f64(raw acts)",
                     why="the q8_1 bound + sum_j |w_j||x_j - xq_j| (activation rounding) + gamma64_K"),
        ]

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        col, row = index
        return f"column {col}, row {row}"

    def bytes_moved(self, case: Case) -> int:
        nb = case.cols // BLOCK_VALUES
        return case.rows * nb * BLOCK_BYTES + case.ncols * 2 * nb * Q8_1_BYTES + case.ncols * case.rows * 4


def _granule_padded(cupy: Any, host: np.ndarray) -> Any:
    """`host` on the device, in an allocation rounded up to whole 16-byte granules (q2warp.cu's MEMORY
    CONTRACT: new reads the aligned granules that hold a buffer's bytes, so up to 15 bytes past its end).
    The array handed to the kernels is a view of exactly host's shape; the padding is zeros."""
    flat = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
    padded = np.zeros(-(-flat.size // GRANULE_BYTES) * GRANULE_BYTES, dtype=np.uint8)
    padded[:flat.size] = flat
    return cupy.asarray(padded)[:flat.size].view(host.dtype).reshape(host.shape)


# --- the launch ABI of TOML variants (docs/ABI.md) ------------------------------------------------------
def _abi_fields(case: Case) -> dict[str, int]:
    nb = case.cols // BLOCK_VALUES
    return {"rows": case.rows, "cols": case.cols, "ncols": case.ncols, "nb": nb,
            "act_bytes": case.ncols * 2 * nb * Q8_1_BYTES}


Q2WARP_ABI = LaunchAbi(
    family="q2warp",
    args=(
        AbiArg("w", "const uint8_t*", f"rows x nb Q2_0 blocks of {BLOCK_BYTES} bytes (fp16 d, then 2-bit codes), "
                                      f"contiguous: row stride nb * {BLOCK_BYTES} bytes, no padding (rows only "
                                      "2-byte aligned); the allocation ends at the next 16-byte boundary (zeros)",
               lambda c, d, o: d["w"]),
        AbiArg("act", "const uint8_t*", "[ncols][2 * nb] q8_1 blocks (36 bytes), contiguous, quantized on the host; "
                                        "the allocation ends at the next 16-byte boundary (zeros)",
               lambda c, d, o: d["act"]),
        AbiArg("y", "float*", "[ncols][rows] float32, every element written", lambda c, d, o: o["y"]),
        AbiArg("rows", "int", "weight rows (outputs per column)", lambda c, d, o: np.int32(c.rows)),
        AbiArg("nb", "int", "64-value Q2_0 blocks per row (cols / 64)",
               lambda c, d, o: np.int32(c.cols // BLOCK_VALUES)),
    ),
    field_names=("rows", "cols", "ncols", "nb", "act_bytes"),
    fields=_abi_fields,
    placeholder_sets=tuple({"ncols": str(n)} for n in (1, 2, 3, 4)),
    placeholders=lambda case: {"ncols": str(case.ncols)},
    baseline="old",
    writes="y: all ncols x rows floats; bitwise equal to old (q2warp.cu's ARITHMETIC CONTRACT)",
)


# --- helpers ----------------------------------------------------------------------------------------
def new_kernel_shared_bytes(act_ptr: int, ncols: int, nb: int) -> int:
    """Dynamic shared memory of q2warp_new: the 16-byte granules covering every activation byte."""
    head = act_ptr & 15
    return (head + ncols * 2 * nb * Q8_1_BYTES + 15) // 16 * 16


def _weights(case: Case, src) -> np.ndarray:
    from strata_bench.data.store import load_fixture
    from strata_bench.data.synthetic import synthetic_weights
    from strata_bench.formats import get_format

    if src.kind != "fixture":
        return synthetic_weights("q2_0", case.rows, case.cols, src.seed, edge=src.edge)
    fix = load_fixture(src.fixture)
    if fix.cols != case.cols:
        raise InputError(f"q2warp: fixture {src.fixture} has {fix.cols} inputs per row, the case {case.cols}")
    raw = get_format("q2_0").quantize(fix.values())  # real weights, requantized to Q2_0
    reps = math.ceil(case.rows / fix.rows)
    return np.ascontiguousarray(np.tile(raw, (reps, 1))[: case.rows])


def _activations(cols: int, ncols: int, seed: int, edge: bool) -> np.ndarray:
    """Columns of a (4, cols) seeded draw, so column 0 is the same for every column count."""
    from strata_bench.data.synthetic import seeded_activations

    x = seeded_activations(seed + ACT_SEED_OFFSET, (4, cols))[:ncols].copy()
    if edge:
        x[:, :32] = 0.0  # an all-zero q8_1 block: d = 0, q = 0
        if cols > 32:
            x[:, 32] = OUTLIER  # one block dominated by an outlier: its other codes round to 0 or +-1
    return x


def decode_q2_0(raw: np.ndarray, rows: int, nb: int) -> tuple[np.ndarray, np.ndarray]:
    """(levels int8 (rows, 2nb, 32) in {-3,-1,1,3}, d float64 (rows, nb)) of Q2_0 rows, by half-block."""
    blocks = np.ascontiguousarray(raw, dtype=np.uint8).reshape(rows, nb, BLOCK_BYTES)
    d = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float64)
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    codes = (blocks[:, :, None, 2:] >> shifts) & np.uint8(3)  # [r, b, k, c] = element 16k + c
    levels = codes.astype(np.int8) * np.int8(2) - np.int8(3)
    return levels.reshape(rows, 2 * nb, 32), d


def _reference_for_columns(case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
    """q2_reference of this case, sliced from the 4-column one of the same weights when the inputs are
    those of that case's first columns (they are for every seeded case: one reference serves n = 1..4)."""
    full_case = replace(case, ncols=4)
    full = _full_reference(full_case)
    if np.array_equal(full["w"], host["w"]) and np.array_equal(full["x"][: case.ncols], host["x"]):
        n = case.ncols
        return {"y_q": full["y_q"][:n], "y_raw": full["y_raw"][:n], "bound_q": full["bound_q"][:n],
                "bound_raw": full["bound_raw"][:n]}
    return q2_reference(host["w"], host["x"], host["act"], case.rows, case.cols)


@functools.lru_cache(maxsize=2)
def _full_reference(case: Case) -> dict[str, Any]:
    host = Q2Warp().make_inputs(case)
    ref = q2_reference(host["w"], host["x"], host["act"], case.rows, case.cols)
    return {**ref, "w": host["w"], "x": host["x"]}


def q2_reference(raw: np.ndarray, x: np.ndarray, act: np.ndarray, rows: int, cols: int) -> dict[str, Any]:
    """Both float64 references of y (ncols, rows), their per-output bounds (bound_q, bound_raw, the
    tolerances the checks apply) and the largest of each (tol_q, tol_raw), computed in row chunks."""
    nb = cols // BLOCK_VALUES
    nh = 2 * nb
    d_a, _, q_a = unpack_q8_1(act)  # (ncols, nh), (ncols, nh, 32)
    xq = dequantize_q8_1(act)  # (ncols, cols)
    x64 = x.astype(np.float64)
    q_t = np.ascontiguousarray(q_a.astype(np.float32).transpose(1, 2, 0))  # (nh, 32, ncols)
    chain = math.ceil(nh / OLD_THREADS)
    rel_q = float(gamma(chain + 9)) + float(gamma(nh, U64))
    y_q, y_raw, b_q, b_raw = [], [], [], []
    for r0 in range(0, rows, REF_CHUNK_ROWS):
        n = min(REF_CHUNK_ROWS, rows - r0)
        levels, d_w = decode_q2_0(raw[r0:r0 + n], n, nb)
        d_w_h = np.repeat(d_w, 2, axis=1)  # (n, nh)
        # S[h, r, c]: exact in float32 (integers, every partial sum below 2^24).
        s = np.matmul(np.ascontiguousarray(levels.astype(np.float32).transpose(1, 0, 2)), q_t).astype(np.float64)
        terms = d_w_h.T[:, :, None] * d_a.T[:, None, :] * s  # exact products, (nh, n, ncols)
        chunk_q = terms.sum(axis=0)
        bound_q = np.abs(terms).sum(axis=0) * rel_q
        w64 = (levels.astype(np.float64) * d_w_h[..., None]).reshape(n, cols)
        chunk_raw = w64 @ x64.T
        rounding = np.abs(w64) @ np.abs(x64 - xq).T + float(gamma(cols, U64)) * (np.abs(w64) @ np.abs(x64).T)
        y_q.append(chunk_q)
        y_raw.append(chunk_raw)
        b_q.append(bound_q)
        b_raw.append(bound_q + rounding)
    out = {"y_q": np.concatenate(y_q).T.copy(), "y_raw": np.concatenate(y_raw).T.copy()}
    bound_q, bound_raw = np.concatenate(b_q).T.copy(), np.concatenate(b_raw).T.copy()
    out.update({"bound_q": bound_q, "bound_raw": bound_raw, "tol_q": float(bound_q.max()),
                "tol_raw": float(bound_raw.max())})
    return out
