"""Family `mmq`: llama.cpp's quantized prompt GEMM (mul_mat_q, mmq.py) without expert ids, on shapes of its
own, a family that `--ggml` adds to a run's catalog. Its activations quantize exactly, so it isolates
mul_mat_q's fp32 arithmetic; pfgemm's variant ggml (mmq_variants.py, with ids) runs the same kernels on
pfgemm's fp16 activations, whose 8-bit quantization error its model adds (mmq_error.py).

    Y[j, i] = sum_k X[j, k] * W[i, k]      (i < rows, j < ncols, k < cols)

W: `rows` quantized rows of `cols` values; X: float32 [ncols][cols]; Y: float32 [ncols][rows].

The activations are made so that ggml's 8-bit quantization is exact: each 32-value chunk is 2^e * q with
integer codes |q| <= 127, one of them +-127, e in -6..0. ggml's quantizer then finds amax = 127 * 2^e and
its codes are q again (its fast-math 127/amax and 1/d_inv are within 2^-21 of 2^-e and 2^e, far from a
rounding boundary of the codes), so the float64 reference X W^T is what the GEMM must compute, and the only
error left is its fp32 arithmetic (`mmq_bound`). Weights: seeded random blocks, rows packed at whole blocks.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from strata_bench.kit import Case, Expected, Family, InputError, U32, gamma, parse_data

FAMILY = "mmq"
# The formats whose mul_mat_q dot is ggml_cuda_mmq_vec_dot_q8_0_q8_1_mma on Turing and newer: int8 codes of
# the weights times a block scale that is exact in fp32 (the product of the format's scales).
FORMATS = ("q4_0", "q5_0", "q8_0", "iq4_nl", "iq4_xs")
CHUNK = 32  # values per activation scale (mmq's D4 and DS4 layouts)
SCALE_EXPONENTS = (-6, 0)  # 2^e of each chunk: fp16-normal, so DS4's half scale is exact too
ACT_SEED_OFFSET = 7919  # activations get their own stream, independent of the weights
# The stored activation scale d = 1 / (127 / amax) under -use_fast_math (approximate division and reciprocal):
# within 2^-21 of amax / 127; 2^-20 leaves room.
SCALE_DEVIATION = 2.0 ** -20
SHAPES = ((1024, 2048, 16), (1000, 2048, 100), (4096, 1024, 512), (1000, 1024, 512))
BENCH_SHAPE = (4096, 4096, 512)
BENCH_FORMATS = ("q4_0", "q8_0", "iq4_xs")


def prequantized_activations(seed: int, ncols: int, k: int) -> np.ndarray:
    """float32 [ncols][k]: chunks 2^e q that ggml's quantize_mmq_q8_1 quantizes exactly (module docstring)."""
    rng = np.random.default_rng(seed)
    chunks = k // CHUNK
    q = rng.integers(-126, 127, size=(ncols, chunks, CHUNK))
    where = rng.integers(0, CHUNK, size=(ncols, chunks, 1))
    np.put_along_axis(q, where, rng.choice((-127, 127), size=(ncols, chunks, 1)), axis=2)
    e = rng.integers(SCALE_EXPONENTS[0], SCALE_EXPONENTS[1] + 1, size=(ncols, chunks, 1))
    return (q * np.exp2(e)).astype(np.float32).reshape(ncols, k)


def mmq_bound(abs_product: np.ndarray, k: int, term_roundings: int = 2) -> np.ndarray:
    """|Y - X W^T| for each output, from ggml's arithmetic (docs/GGML.md, "mul_mat_q"): each 32-value chunk's
    int8 tensor-core dot C is exact (|C| <= 32 * 127 * 127 < 2^24), its term C * d_w * d_x two fp32 roundings
    (`term_roundings`: three for a dot of two 16-value halves with their own d_w), then the terms of the
    k / 32 chunks summed in fp32 in one thread, stream-k adding at most as many partial sums again:
    gamma(2 + 2 k / 32) of sum |x||w|; plus the stored activation scale's deviation."""
    return 1.01 * (gamma(term_roundings + 2 * (k // CHUNK), U32) + SCALE_DEVIATION) * abs_product


class MmqGemm(Family):
    # No `name` in the class body: that would register it globally when this module is imported. `into`
    # names it and registers it into one run's catalog, as --ggml asks.
    ceiling = None  # a prompt GEMM: bound by the tensor cores, not by bandwidth
    description = "quantized prompt GEMM over 8-bit activations (llama.cpp's mul_mat_q, with --ggml)"

    def default_cases(self) -> Iterable[Case]:
        """Each format at M a multiple of the 128-row tile and not (1000: the fallback instances), N 16-512."""
        return [self.case(fmt, rows, k, n, f"seed:{i + 1}")
                for fmt in self._formats() for i, (rows, k, n) in enumerate(SHAPES)]

    def bench_cases(self) -> Iterable[Case]:
        rows, k, n = BENCH_SHAPE
        return [self.case(fmt, rows, k, n, "seed:1", bench=True) for fmt in BENCH_FORMATS if fmt in self._formats()]

    def _formats(self) -> tuple[str, ...]:
        # The formats a variant was attached for (a run's --format narrows them), else all of them.
        declared = [f for v in self.variants for f in (v.formats or ())]
        return tuple(f for f in FORMATS if f in declared) if declared else FORMATS

    def make_inputs(self, case: Case) -> dict[str, Any]:
        from strata_bench.data.synthetic import synthetic_weights

        if case.fmt not in FORMATS or case.cols % 256 or case.rows <= 0 or case.ncols <= 0:
            raise InputError(f"{FAMILY}: {case.fmt} {case.rows}x{case.cols}: formats {', '.join(FORMATS)}, "
                             f"values per row a multiple of 256 (mul_mat_q's K tile)")
        src = parse_data(case.data)
        if src.kind != "seed":
            raise InputError(f"{FAMILY}: data {case.data!r}: only seed:N (the activations must quantize exactly)")
        raw = synthetic_weights(case.fmt, case.rows, case.cols, src.seed)
        x = prequantized_activations(src.seed + ACT_SEED_OFFSET, case.ncols, case.cols)
        return {"w": np.ascontiguousarray(raw), "x": x}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"w": cupy.asarray(host["w"]), "x": cupy.asarray(host["x"])}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"y": cupy.empty((case.ncols, case.rows), dtype=cupy.float32)}

    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        from strata_bench.formats import get_format

        w = get_format(case.fmt).dequantize(host["w"]).astype(np.float64).reshape(case.rows, case.cols)
        x = host["x"].astype(np.float64)
        bound = mmq_bound(np.abs(x) @ np.abs(w).T, case.cols)
        return [Expected("y", x @ w.T, bound, label="f64",
                         why="exact int8 dots, two fp32 roundings a 32-value term and fp32 sums in ggml's order: "
                             "gamma(2 + k/16) sum|x||w| + 2^-20 sum|x||w| (docs/GGML.md)")]

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        j, i = index
        return f"activation column {j}, weight row {i}"

    def bytes_moved(self, case: Case) -> int:
        from strata_bench.formats import get_format

        return (case.rows * get_format(case.fmt).bytes_per_row(case.cols) + case.ncols * case.cols * 4
                + case.ncols * case.rows * 4)

    def flops(self, case: Case) -> int:
        return 2 * case.rows * case.cols * case.ncols


def into(catalog: dict) -> Family:
    """Register the family into a run's catalog (never the global registry) and return it."""
    from strata_bench.cases.registry import register_family, registering_into

    MmqGemm.name = FAMILY
    with registering_into(catalog):
        register_family(MmqGemm)
    return catalog[FAMILY]
