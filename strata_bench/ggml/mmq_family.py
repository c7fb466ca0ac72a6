"""Family `mmq`: llama.cpp's quantized prompt GEMM (mul_mat_q, mmq.py) without expert ids, on shapes of its
own, a family that `--ggml` adds to a run's catalog. Its activations quantize exactly, so it isolates
mul_mat_q's fp32 arithmetic; pfgemm's variant ggml (mmq_variants.py, with ids) runs the same kernels on
pfgemm's fp16 activations, whose 8-bit quantization error its model adds (mmq_error.py).

    Y[j, i] = sum_k X[j, k] * W[i, k]      (i < rows, j < ncols, k < cols)

W: `rows` quantized rows of `cols` values; X: float32 [ncols][cols]; Y: float32 [ncols][rows].

The activations are made so that ggml's 8-bit quantization is exact: each chunk of values that one scale
covers (32; q2_K's D2S6 layout: 64) is 2^e * q with integer codes |q| <= 127, each 32 values with a +-127, e
in -6..0. ggml's quantizer then finds amax = 127 * 2^e and its codes are q again (its fast-math 127/amax and
1/d_inv are within 2^-21 of 2^-e and 2^e, far from a rounding boundary of the codes), so the float64
reference X W^T (W's exact values) is what the GEMM must compute. What is left is what the format's dot does
(mmq_dots.py): scales the tile loader rounds to fp16, the fp16 activation sums a min term multiplies, and
fp32 rounding (`mmq_bound`). Weights: seeded random blocks, rows packed at whole blocks.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from strata_bench.ggml.mmq_dots import DOTS, activation_sums, split
from strata_bench.kit import Case, Expected, Family, InputError, U32, gamma, parse_data

FAMILY = "mmq"
# Every format ggml's mul_mat_q takes on Turing and newer that strata-bench knows: each one's MMA dot, its
# activation layout and the scales it rounds are in mmq_dots.py.
FORMATS = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
           "iq1_s", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs")
CHUNK = 32  # values per activation scale (mmq's D4 and DS4 layouts)
SCALE_EXPONENTS = (-6, 0)  # 2^e of each chunk: fp16-normal, so DS4's half scale is exact too
ACT_SEED_OFFSET = 7919  # activations get their own stream, independent of the weights
# The stored activation scale d = 1 / (127 / amax) under -use_fast_math (approximate division and reciprocal):
# within 2^-21 of amax / 127; 2^-20 leaves room.
SCALE_DEVIATION = 2.0 ** -20
F64_REL = 2.0 ** -52  # a float64 dot of K terms errs by at most K 2^-53 of its |terms|: twice that, for two
SHAPES = ((1024, 2048, 16), (1000, 2048, 100), (4096, 1024, 512), (1000, 1024, 512))
BENCH_SHAPE = (4096, 4096, 512)
BENCH_FORMATS = ("q4_0", "q8_0", "q4_k", "iq4_xs")


def prequantized_activations(seed: int, ncols: int, k: int, per_scale: int = CHUNK) -> np.ndarray:
    """float32 [ncols][k]: chunks 2^e q that ggml's quantize_mmq_q8_1 quantizes exactly (module docstring);
    one e per `per_scale` values (64 for the D2S6 layout), a +-127 in every 32."""
    rng = np.random.default_rng(seed)
    chunks = k // CHUNK
    q = rng.integers(-126, 127, size=(ncols, chunks, CHUNK))
    where = rng.integers(0, CHUNK, size=(ncols, chunks, 1))
    np.put_along_axis(q, where, rng.choice((-127, 127), size=(ncols, chunks, 1)), axis=2)
    per = per_scale // CHUNK
    e = rng.integers(SCALE_EXPONENTS[0], SCALE_EXPONENTS[1] + 1, size=(ncols, chunks // per, 1))
    return (q * np.exp2(np.repeat(e, per, axis=1))).astype(np.float32).reshape(ncols, k)


def scale_values(fmt: str) -> int:
    """The values one activation scale covers in the layout `fmt`'s dot reads (mmq.ds_layout)."""
    from strata_bench.ggml.mmq import ds_layout

    return 64 if ds_layout(fmt) == "D2S6" else CHUNK


def mmq_bound(abs_product: np.ndarray, k: int, term_roundings: int = 2, adds: int = 1) -> np.ndarray:
    """|Y - X W^T| for each output, from ggml's arithmetic (docs/GGML.md, "mul_mat_q"): each 32-value chunk's
    int8 tensor-core dot C is exact (|C| <= 32 * 127 * 127 < 2^24), its term C * d_w * d_x two fp32 roundings
    (`term_roundings`: three for a dot of two 16-value halves with their own d_w), then the terms of the
    k / 32 chunks summed in fp32 in one thread (`adds` sums a chunk: two where a min term is added too),
    stream-k adding at most k / 32 partial sums again: gamma(2 + 2 k / 32) of sum |x||w|; plus the stored
    activation scale's deviation. `abs_product`: the sum of the terms' magnitudes."""
    return 1.01 * (gamma(term_roundings + (adds + 1) * (k // CHUNK), U32) + SCALE_DEVIATION) * abs_product


def reference_and_bound(fmt: str, raw: np.ndarray, x: np.ndarray, rows: int, k: int) -> tuple[np.ndarray,
                                                                                            np.ndarray]:
    """X W^T with W's exact values, and each output's bound on ggml's |Y - X W^T|: the known deviation of what
    the dot computes in exact arithmetic (the loader's scales and offsets, the activation sums it reads;
    mmq_dots.split), mmq_bound over the magnitude of its terms, and float64's own K 2^-52 of the sums."""
    parts = split(fmt, raw, rows, k)
    dot = DOTS[fmt]
    x = np.asarray(x, dtype=np.float64)
    w = parts.exact
    sums, sums_read = activation_sums(x, parts.group)
    deviation = (x @ (parts.a_dev - parts.a).T + (sums_read - sums) @ parts.b_dev.T
                 + sums @ (parts.b_dev - parts.b).T)
    magnitude = np.abs(x) @ np.abs(parts.a_dev).T + np.abs(sums_read) @ np.abs(parts.b_dev).T
    own = k * F64_REL * (np.abs(x) @ np.abs(w).T + magnitude)
    return x @ w.T, np.abs(deviation) + mmq_bound(magnitude, k, dot.term_roundings, dot.adds) + own


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
        x = prequantized_activations(src.seed + ACT_SEED_OFFSET, case.ncols, case.cols, scale_values(case.fmt))
        return {"w": np.ascontiguousarray(raw), "x": x}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"w": cupy.asarray(host["w"]), "x": cupy.asarray(host["x"])}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"y": cupy.empty((case.ncols, case.rows), dtype=cupy.float32)}

    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        ref, bound = reference_and_bound(case.fmt, host["w"], host["x"], case.rows, case.cols)
        return [Expected("y", ref, bound, label="f64",
                         why=f"{DOTS[case.fmt].name}: exact int8 dots, the loader's fp16 scales and the fp16 "
                             "activation sums as the dot takes them, fp32 roundings and sums in ggml's order "
                             "(docs/GGML.md)")]

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
