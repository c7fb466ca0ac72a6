"""dequant: quantized rows -> float32 on the device, bit-identical to gguf-py (the numpy Q2_0 reference
for q2_0).

Kernel: kernels_src/dequant/dequant.cu (`dequant_f32<F>`, one thread per 32-value chunk). One variant.
Outputs: y float32 (rows, cols), and y_bits, the same memory as uint32, so the oracle comparison
includes the sign of zero (a float compare cannot see -0.0 vs 0.0).

References (docs/ARITHMETIC.md, section 1):
- "gguf f32 bits": y_bits against gguf-py's float32 output's bit patterns, tolerance 0.
- "gguf f32": y against gguf-py's float32 output widened to float64, tolerance 0.
- "f64 exact": y against the format's exact float64 values (dequantize_f64), tolerance half an fp32
  ulp of the largest value, 2^-24 max|ref| (the products are in fact exact, so the error is 0).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from strata_bench.kit import (KERNEL_FORMATS, Q2_0_FIXTURE_SOURCE, AbiArg, Case, Expected, Family, FixtureRef,
                              LaunchAbi, Variant, ceil_div, check_shape, fixture_ref, padded, padded_row_args,
                              parse_data, row_stride, traits, weights)

from strata_bench.kernels.constants import DEQUANT_THREADS as THREADS
VARIANTS = ("dequant",)


def fixture_name(fmt: str) -> str:
    """The shipped real-weight fixture of a format (q2_0 requantizes the q8_0 one)."""
    return f"smollm2-ffn_down.{Q2_0_FIXTURE_SOURCE if fmt == 'q2_0' else fmt}"


class Dequant(Family):
    name = "dequant"
    ceiling = 'copy'
    sources = ("dequant/dequant.cu",)
    description = "quantized rows -> float32, bitwise against gguf-py (numpy reference for q2_0)"
    own_formats = KERNEL_FORMATS  # a variant declaring others (an engine's q4_k) gets cases of those for itself

    def default_cases(self) -> Iterable[Case]:
        from strata_bench.formats import get_format

        cases = []
        for fmt in KERNEL_FORMATS:
            cases += self._format_cases(fmt)
        for fmt in self.foreign_formats():
            # The same, and rows of one block (32 or 256 values): a format only a foreign variant runs.
            cases += self._format_cases(fmt)
            cases.append(self.case(fmt, 9, get_format(fmt).block_size, 1, "seed:1"))
        return cases

    def _format_cases(self, fmt: str) -> list[Case]:
        cases = [self.case(fmt, 1024, 2560, 1, "seed:1"),
                 self.case(fmt, 7, 768, 1, "edge:2")]  # edge blocks first; 7 rows of 3 blocks (or 12/24)
        shipped = fixture_ref(fixture_name(fmt))
        if shipped is not None:
            cases += self.fixture_cases(shipped, fmt=fmt)
        return cases

    def fixture_cases(self, fixture: FixtureRef, ncols: tuple[int, ...] | None = None,
                      fmt: str | None = None) -> list[Case]:
        """The fixture's rows dequantized (one case: dequant has no columns); q2_0 from q8_0 rows; a format only
        a foreign variant runs from its own rows."""
        from strata_bench.formats import get_format

        fmt = fmt or fixture.fmt
        takes = fmt == fixture.fmt or (fmt == "q2_0" and fixture.fmt == Q2_0_FIXTURE_SOURCE)
        known = fmt in KERNEL_FORMATS or (fmt == fixture.fmt and fmt in self.foreign_formats())
        if not known or not takes or fixture.cols % get_format(fmt).block_size:
            return []
        return [self.case(fmt, fixture.rows, fixture.cols, 1, fixture.data)]

    def bench_cases(self) -> Iterable[Case]:
        return [self.case(fmt, 8192, 8192, 1, "seed:1") for fmt in (*KERNEL_FORMATS, *self.foreign_formats())]

    def make_inputs(self, case: Case) -> dict[str, Any]:
        check_shape(case.fmt, case.cols)
        raw, note = weights(case.fmt, case.rows, case.cols, parse_data(case.data))
        return {"raw": raw, "padded": padded(case.fmt, raw), "note": note}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"w": cupy.asarray(host["padded"])}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        y = cupy.empty((case.rows, case.cols), dtype=cupy.float32)
        return {"y": y, "y_bits": y.view(cupy.uint32)}

    def _dequant_kernels(self, source: str) -> list[str]:
        """dequant_f32<F> for every format, from dequant's own source (a subclass may add others)."""
        return [f"dequant_f32<{traits(fmt)}>" for fmt in KERNEL_FORMATS] if source in Dequant.sources else []

    def _launch_dequant(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                        stream: Any = None) -> None:
        nchunks = case.cols // 32
        fn = kernels.get(f"dequant_f32<{traits(case.fmt)}>")
        grid = (ceil_div(case.rows * nchunks, THREADS),)
        fn(grid, (THREADS,), (dev["w"], np.int64(row_stride(case.fmt, case.cols)), np.int32(case.rows),
                              np.int32(nchunks), outs["y"]), stream=stream)

    variants = (Variant(VARIANTS[0], _dequant_kernels, _launch_dequant,
                        "one thread per 32-value chunk, rows at a 16-byte aligned stride"),)

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "dequant")."""
        return DEQUANT_ABI

    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        from strata_bench.formats import get_format

        fmt = get_format(case.fmt)
        oracle = fmt.dequantize(host["raw"])  # float32 (rows, cols)
        exact = fmt.dequantize_f64(host["raw"])
        return [
            Expected("y_bits", oracle.view(np.uint32).astype(np.float64), 0.0, label="gguf f32 bits",
                     why="bit-identical to gguf-py's float32 (sign of zero included)"),
            Expected("y", oracle.astype(np.float64), 0.0, label="gguf f32", why="bit-identical to gguf-py"),
            Expected("y", exact, 2.0 ** -24 * float(np.abs(exact).max()), label="f64 exact",
                     why="one fp32 rounding at most: 2^-24 max|ref| " + (
                         "(the products are exact: error 0)" if case.fmt in KERNEL_FORMATS else
                         "(a scaled code plus or minus a min rounds once: q4_1, q5_1, K-quants)")),
        ]

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        from strata_bench.formats import get_format

        row, col = index
        return f"row {row}, column {col}, block {col // get_format(case.fmt).block_size}"

    def bytes_moved(self, case: Case) -> int:
        from strata_bench.formats import get_format

        return case.rows * get_format(case.fmt).bytes_per_row(case.cols) + case.rows * case.cols * 4


def _abi_fields(case: Case) -> dict[str, int]:
    from strata_bench.formats import get_format

    fmt = get_format(case.fmt)
    # block_bytes and block_values: an engine's strides count blocks (exact_div(stride, block_bytes)).
    return {"rows": case.rows, "cols": case.cols, "nchunks": case.cols // 32, "stride": row_stride(case.fmt, case.cols),
            "block_bytes": fmt.type_size, "block_values": fmt.block_size}


DEQUANT_ABI = LaunchAbi(
    family="dequant",
    args=(
        *padded_row_args("rows of blocks at `stride` (16-byte aligned); 16 readable bytes after the last row",
                         rows="rows", cols="values per row"),
        AbiArg("y", "float*", "[rows][cols] float32, every element written", lambda c, d, o: o["y"]),
    ),
    field_names=("rows", "cols", "nchunks", "stride", "block_bytes", "block_values"),
    fields=_abi_fields,
    placeholder_sets=tuple({"traits": traits(f), "fmt": f} for f in KERNEL_FORMATS),
    placeholders=lambda case: {"traits": traits(case.fmt), "fmt": case.fmt},
    baseline=VARIANTS[0],
    writes="y: rows x cols floats, bit for bit gguf-py's dequantization",
)
