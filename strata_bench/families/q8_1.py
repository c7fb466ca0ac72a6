"""q8_1: float32 activations -> q8_1 blocks on the device (quantize_q8_1, the first step of every mmvq and
grouped launch), checked field by field against numpy.

Kernels: kernels_src/q8_1/q8_1.cu: `quantize_q8_1` writes the blocks (output q8, uint8 (n, nb*36));
`q8_1_fields` then copies d, s and qs into separate outputs so each field gets its own check.
Case: `rows` = activation rows (columns of a mat-vec), `cols` = values per row.

References (docs/ARITHMETIC.md, section 2):
- d (and d_bits, the same memory as uint16) and qs: bitwise against the kit's `quantize_q8_1`, numpy's IEEE
  float32 division, exact round-half-away-from-zero and round-to-nearest-even fp16 conversion: tol 0.
- s: bitwise against numpy's float32 butterfly sum in warp_sum_f32's order (tol 0), and against the
  exact float64 sum with tol = max over blocks of gamma_5 sum|x| + fp16 half-ulp(|S| + gamma_5 sum|x|)
  + gamma64_31 sum|x| (5 butterfly roundings, one fp16 rounding, float64's own summation).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from strata_bench.kit import (OUTLIER, Q8_1_BYTES, U64, AbiArg, Case, Expected, Family, InputError, LaunchAbi,
                              Variant, activations, ceil_div, fp16_half_ulp, gamma, parse_data, quantize_q8_1,
                              unpack_q8_1)

VARIANTS = ("q8_1",)
TINY = 1e-30  # a block of tiny values: d is far below fp16's range and rounds to 0


def s_tolerance(x: np.ndarray) -> float:
    """Bound on |s_device - sum x| over all blocks (x float32 (..., 32))."""
    abs_sum = np.abs(x.astype(np.float64)).sum(axis=-1)
    exact = x.astype(np.float64).sum(axis=-1)
    butterfly = float(gamma(5)) * abs_sum
    bound = butterfly + fp16_half_ulp(np.abs(exact) + butterfly) + float(gamma(31, U64)) * abs_sum
    return float(bound.max())


class Q8_1(Family):
    name = "q8_1"
    ceiling = 'copy'
    sources = ("q8_1/q8_1.cu",)
    description = "float32 -> q8_1 blocks (d, s, qs), bitwise against numpy"

    def default_cases(self) -> Iterable[Case]:
        return [self.case("f32", 1, 2560, 1, "seed:1"), self.case("f32", 11, 8192, 1, "seed:2"),
                self.case("f32", 4, 2560, 1, "edge:3"), self.case("f32", 3, 32, 1, "edge:4")]

    def bench_cases(self) -> Iterable[Case]:
        return [self.case("f32", 8, 8192, 1, "seed:1")]

    def make_inputs(self, case: Case) -> dict[str, Any]:
        if case.cols <= 0 or case.cols % 32 or case.rows <= 0:
            raise InputError(f"q8_1: values per row must be a positive multiple of 32, got {case.rows}x{case.cols}")
        src = parse_data(case.data)
        x = activations(case.cols, case.rows, src)
        if src.edge:
            x = _edge_blocks(x)
        return {"x": x, "q8": quantize_q8_1(x)}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"x": cupy.asarray(host["x"])}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        nb = case.cols // 32
        d = cupy.empty((case.rows, nb), dtype=cupy.float16)
        return {"q8": cupy.empty((case.rows, nb * Q8_1_BYTES), dtype=cupy.uint8), "d": d,
                "d_bits": d.view(cupy.uint16), "s": cupy.empty((case.rows, nb), dtype=cupy.float16),
                "qs": cupy.empty((case.rows, nb, 32), dtype=cupy.int8)}

    def _q8_1_kernels(self, source: str) -> list[str]:
        # Only from the family's own source: a variant's source (TOML, ggml) has kernels of its own.
        return ["quantize_q8_1", "q8_1_fields"] if source == Q8_1.sources[0] else []

    def _launch_q8_1(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                     stream: Any = None) -> None:
        n_blocks = case.rows * case.cols // 32
        kernels.get("quantize_q8_1")((ceil_div(n_blocks, 8),), (256,), (dev["x"], np.int64(n_blocks), outs["q8"]),
                                     stream=stream)
        self._split_fields(case, kernels, dev, outs, stream)

    def _split_fields(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                      stream: Any = None) -> None:
        """q8_1_fields: the blocks' d, s and qs copied into outputs of their own (every variant's last step)."""
        n_blocks = case.rows * case.cols // 32
        kernels.get("q8_1_fields")((ceil_div(n_blocks * 32, 256),), (256,),
                                   (outs["q8"], np.int64(n_blocks), outs["d"], outs["s"], outs["qs"]), stream=stream)

    variants = (Variant(VARIANTS[0], _q8_1_kernels, _launch_q8_1,
                        "quantize_q8_1, then q8_1_fields copies d, s and qs apart"),)

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "q8_1"): it writes q8; q8_1_fields runs after it."""
        return Q8_1_ABI

    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        q8 = host["q8"]
        blocks = q8.view(np.dtype([("d", "<f2"), ("s", "<f2"), ("qs", "i1", (32,))])).reshape(case.rows, -1)
        d, s, q = unpack_q8_1(q8)
        x = host["x"].reshape(case.rows, -1, 32)
        exact_sum = x.astype(np.float64).sum(axis=-1)
        return [
            Expected("q8", q8.astype(np.float64), 0.0, label="numpy blocks", why="every byte as numpy makes it"),
            Expected("d_bits", blocks["d"].view(np.uint16).astype(np.float64), 0.0, label="numpy d bits",
                     why="fp16(amax/127), IEEE division, round to nearest even"),
            Expected("qs", q.astype(np.float64), 0.0, label="numpy qs", why="roundf(x/d), ties away from zero"),
            Expected("s", s, 0.0, label="numpy butterfly s", why="fp16 of the fp32 butterfly sum, same order"),
            Expected("s", exact_sum, s_tolerance(x), label="f64 sum",
                     why="gamma_5 sum|x| + fp16 half-ulp + gamma64_31 sum|x|"),
        ]

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        return f"row {index[0]}, block {index[1] // (Q8_1_BYTES if output == 'q8' else 1)}"

    def bytes_moved(self, case: Case) -> int:
        return case.rows * case.cols * 4 + case.rows * case.cols // 32 * Q8_1_BYTES


# --- the launch ABI of TOML variants (docs/ABI.md) ------------------------------------------------------
Q8_1_ABI = LaunchAbi(
    family="q8_1",
    args=(
        AbiArg("x", "const float*", "[rows][cols] float32, contiguous (cols a multiple of 32, row stride cols); "
                                    "no readable bytes after the last value", lambda c, d, o: d["x"]),
        AbiArg("n_blocks", "long long", "32-value blocks in all (rows * cols / 32)",
               lambda c, d, o: np.int64(c.rows * c.cols // 32)),
        AbiArg("q8", "block_q8_1*", "[rows][cols / 32] q8_1 blocks of 36 bytes (fp16 d, fp16 s, 32 int8 qs), "
                                    "contiguous, no padding; every byte written", lambda c, d, o: o["q8"]),
    ),
    field_names=("rows", "cols", "n_blocks"),
    fields=lambda case: {"rows": case.rows, "cols": case.cols, "n_blocks": case.rows * case.cols // 32},
    placeholder_sets=({},),
    placeholders=lambda case: {},
    epilogue=lambda family, case, kernels, dev, outs, stream: family._split_fields(case, kernels, dev, outs, stream),
    baseline=VARIANTS[0],
    writes="q8: every byte of rows x cols/32 blocks, bitwise numpy's quantize_q8_1 (d, s and qs are then "
           "copied apart by the family's q8_1_fields and checked one by one)",
)


def _edge_blocks(x: np.ndarray) -> np.ndarray:
    """Edge blocks at the start of every row: all zero (d = 0), one outlier among normals, tiny values
    (d rounds to fp16 zero), ties (x/d exactly k + 0.5 for some values), fp16-subnormal d."""
    x = x.copy()
    nb = x.shape[1] // 32
    specials = [np.zeros(32, np.float32)]
    outlier = x[0, :32].copy()
    outlier[5] = OUTLIER
    specials.append(outlier)
    specials.append(np.full(32, TINY, np.float32) * np.linspace(-1, 1, 32, dtype=np.float32))
    ties = np.arange(-16, 16, dtype=np.float32) + np.float32(0.5)
    ties[0] = -127.0  # amax 127 -> d = 1, so x/d = k + 0.5 exactly: roundf must go away from zero
    specials.append(ties)
    specials.append(np.linspace(-1e-5, 1e-5, 32, dtype=np.float32))  # d ~ 8e-8: fp16 subnormal
    for i, block in enumerate(specials[:nb]):
        x[:, 32 * i: 32 * i + 32] = block
    return x
