"""fp16deq: dense dequantization of Q8_0 and IQ4_XS to FP16: generic kernel (old) vs 16-byte stores (new).

Kernels: kernels_src/fp16deq/fp16deq.cu. Its ARITHMETIC CONTRACT proves that every value is formed
exactly in fp32 (at most 18 significant bits for Q8_0, 23 for IQ4_XS, never fp32-subnormal) and rounded
once to FP16, so both kernels write the correctly rounded value and each other's bits.

Variant "new" is the production entry point: `choose_kernel` takes the 16-byte-store kernel when the
output pointer is 16-byte aligned and the leading dimension a multiple of 8 (and, for IQ4_XS, the source
8-byte aligned), else the generic kernel. The kernel each launch ran is recorded in `dispatch_log`, and a
case that names the path it must take (param `path`) fails when the dispatcher chose the other one.

Float64 reference: the exact value (gguf-py's unit dequantization times the fp16 scales, in float64,
`QuantFormat.dequantize_f64`) rounded with numpy to float16 (round to nearest even; overflow gives
+-inf). Tolerance 0: the output must be that value (non-finite values must match exactly; padding
elements, which must stay unwritten, are NaN in the reference so the poison matches).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from strata_bench.kit import (AbiArg, Case, CheckFailed, Expected, Family, FixtureRef, InputError, LaunchAbi, Variant,
                              ceil_div, parse_data)

from strata_bench.kernels.constants import BLOCK_SHAPES, FP16DEQ_THREADS as THREADS
GENERIC, VEC16 = "generic", "vec16"
FORMATS = {fmt: BLOCK_SHAPES[fmt] for fmt in ("q8_0", "iq4_xs")}  # values and bytes per block
SRC_ALIGN = {"q8_0": 2, "iq4_xs": 8}  # source alignment the 16-byte kernel's loads need


@dataclass(frozen=True)
class WideConfig:
    """A wide 16-byte-store candidate kernel of fp16deq.cu ("Wide candidates"): `out` outputs per thread;
    for IQ4_XS the thread mapping (own: whole 8-byte halves of one sub-block; strided: the vec16 octets,
    32 lanes apart) and the kvalue lookup (shared: floats in shared memory; prmt: bytes in registers).
    Same dispatch rules as vec16 (`choose_kernel`). "new" launches the one VEC16_WIDE names for its format;
    experiments/fp16deq_tune times them all."""

    fmt: str
    out: int
    mapping: str = "own"
    lut: str = "shared"

    MAPPINGS = ("own", "strided")
    LUTS = ("shared", "prmt")

    @property
    def kernel(self) -> str:
        if self.fmt == "q8_0":
            return f"fp16deq_wide_q8_0<{self.out}>"
        return (f"fp16deq_wide_iq4_xs<{self.out}, {self.MAPPINGS.index(self.mapping)}, "
                f"{self.LUTS.index(self.lut)}>")

    @property
    def label(self) -> str:
        tail = "" if self.fmt == "q8_0" else f"_{self.mapping}_{self.lut}"
        return f"{'q8' if self.fmt == 'q8_0' else 'xs'}_o{self.out}{tail}"


# The kernel of the 16-byte-store path where it is not fp16deq_vec16_<fmt>: IQ4_XS as 16 outputs per thread
# (two 16-byte stores, the block head read once), 91-94% of the H200's copy ceiling against vec16's 75-77%
# (results/tune, experiments/fp16deq_tune; docs/PERF_NOTES.md). Bitwise the same (fp16deq.cu's contract).
VEC16_WIDE: dict[str, WideConfig] = {"iq4_xs": WideConfig("iq4_xs", 16, "own", "shared")}


def choose_kernel(fmt: str, dst_ptr: int, ld: int, src_ptr: int) -> str:
    """The dispatcher of the production entry point: which kernel converts this call."""
    if dst_ptr % 16 == 0 and ld % 8 == 0 and src_ptr % SRC_ALIGN[fmt] == 0:
        return VEC16
    return GENERIC


class Fp16Deq(Family):
    name = "fp16deq"
    ceiling = 'copy'
    sources = ("fp16deq/fp16deq.cu",)
    description = "Q8_0 / IQ4_XS -> FP16: one thread per 32 values vs 16-byte stores, correctly rounded"

    # --- what a family extending fp16deq builds on (kit.builtin_family("fp16deq"); docs/EXTENDING.md,
    # "Extending a built-in family"), beside the public methods path_case, new_kernels and launch_wide ---
    WideConfig = WideConfig  # a wide 16-byte-store kernel (outputs per thread, mapping, lookup)
    VEC16 = VEC16  # the 16-byte-store path's name (a case's `path` param; GENERIC the other one)
    GENERIC = GENERIC

    def __init__(self) -> None:
        self.dispatch_log: dict[tuple[str, str], str] = {}

    # --- cases ------------------------------------------------------------------------------------
    def default_cases(self) -> Iterable[Case]:
        cases, case = [], self.path_case
        for fmt, slice_cols in (("q8_0", 1056), ("iq4_xs", 2304)):
            cases += [
                case(fmt, 96, 4096, "seed:1", VEC16),
                case(fmt, 64, 2048, "edge:2", VEC16),  # zero, subnormal and overflowing scales
                # Rows 37..86 of a 128-row tensor: the source starts mid-tensor (Q8_0: 2-byte aligned).
                case(fmt, 50, slice_cols, "seed:3", VEC16, row0=37, of=128),
                case(fmt, 40, 2048, "seed:4", VEC16, ld=2048 + 8),    # padded, still 16-byte rows
                case(fmt, 40, 2048, "seed:5", GENERIC, ld=2048 + 3),  # padded, rows not 16-byte aligned
                case(fmt, 40, 2048, "edge:6", GENERIC, offset=1),     # output 2 bytes past alignment
            ]
            cases += self.fixture_cases(FixtureRef(f"smollm2-ffn_down.{fmt}", fmt, 64, 1536))
        return cases

    def fixture_cases(self, fixture: FixtureRef, ncols: tuple[int, ...] | None = None,
                      fmt: str | None = None) -> list[Case]:
        """The fixture's rows converted (one case; the 16-byte path where the rows allow it)."""
        fmt = fmt or fixture.fmt
        if fmt not in FORMATS or fmt != fixture.fmt:
            return []
        path = VEC16 if fixture.cols % 8 == 0 else GENERIC  # ld = cols: 16-byte output rows need cols % 8 == 0
        return [self.path_case(fmt, fixture.rows, fixture.cols, fixture.data, path)]

    def bench_cases(self) -> Iterable[Case]:
        return [self.path_case(fmt, rows, 8192, "seed:1", VEC16) for fmt in FORMATS for rows in (8192, 16384)]

    def path_case(self, fmt: str, rows: int, cols: int, data: str, path: str, **params: int) -> Case:
        """A case whose "new" launch must take `path` (GENERIC or VEC16); params row0/of, ld, offset."""
        return self.case(fmt, rows, cols, 1, data, **params, path=path)

    # --- geometry ---------------------------------------------------------------------------------
    @staticmethod
    def geometry(case: Case) -> dict[str, int]:
        if case.fmt not in FORMATS:
            raise InputError(f"fp16deq: format must be one of {', '.join(FORMATS)}, got {case.fmt!r}")
        values, nbytes = FORMATS[case.fmt]
        if case.cols <= 0 or case.cols % values:
            raise InputError(f"fp16deq: {case.fmt} rows must be a positive multiple of {values}, got {case.cols}")
        geo = {"row0": int(case.param("row0", 0)), "of": int(case.param("of", case.rows)),
               "ld": int(case.param("ld", case.cols)), "offset": int(case.param("offset", 0)),
               "row_bytes": case.cols // values * nbytes}
        if geo["ld"] < case.cols or not 0 <= geo["row0"] <= geo["of"] - case.rows:
            raise InputError(f"fp16deq: bad geometry for {case.name}: ld {geo['ld']} < cols or rows outside the tensor")
        return geo

    # --- data -------------------------------------------------------------------------------------
    def make_inputs(self, case: Case) -> dict[str, Any]:
        geo = self.geometry(case)
        src = parse_data(case.data)
        if src.kind == "fixture":
            from strata_bench.data.store import load_fixture

            fix = load_fixture(src.fixture)
            if fix.fmt != case.fmt or fix.cols != case.cols:
                raise InputError(f"fp16deq: fixture {src.fixture} is {fix.fmt} x {fix.cols}, the case "
                                 f"{case.fmt} x {case.cols}")
            raw = np.tile(fix.raw, (math.ceil(geo["of"] / fix.rows), 1))[: geo["of"]]
        else:
            from strata_bench.data.synthetic import synthetic_weights

            raw = synthetic_weights(case.fmt, geo["of"], case.cols, src.seed, edge=src.edge)
            if src.edge:
                raw = with_subnormal_scales(case.fmt, raw)
        return {"w": np.ascontiguousarray(raw)}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"w": cupy.asarray(host["w"])}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        geo = self.geometry(case)
        size = case.rows * geo["ld"]
        buf = cupy.empty(geo["offset"] + size, dtype=cupy.float16)
        return {"y": buf[geo["offset"]:].reshape(case.rows, geo["ld"])}  # contiguous view

    def written_mask(self, case: Case, output: str) -> Any:
        geo = self.geometry(case)
        if geo["ld"] == case.cols:
            return None
        mask = np.zeros((case.rows, geo["ld"]), dtype=bool)
        mask[:, : case.cols] = True
        return mask

    def allows_nonfinite(self, case: Case, output: str) -> bool:
        """Edge data overflows FP16 on purpose: those elements must be +-inf (checked against the reference)."""
        return parse_data(case.data).edge

    # --- launch -----------------------------------------------------------------------------------
    def _old_kernels(self, source: str) -> list[str]:
        if source != Fp16Deq.sources[0]:  # a TOML variant's or an extending family's own source
            return []
        return [f"fp16deq_{GENERIC}_{fmt}" for fmt in FORMATS]

    def new_kernels(self, source: str) -> list[str]:
        """What "new" compiles from `source`: from fp16deq.cu the generic kernel and the 16-byte-store path's
        kernel of each format; nothing from another source."""
        if source != Fp16Deq.sources[0]:
            return []
        return [f"fp16deq_{GENERIC}_{fmt}" for fmt in FORMATS] + [self._vec16_kernel(fmt)[0] for fmt in FORMATS]

    @staticmethod
    def _vec16_kernel(fmt: str) -> tuple[str, int]:
        """The 16-byte-store path's kernel for a format and its outputs per thread."""
        wide = VEC16_WIDE.get(fmt)
        return (wide.kernel, wide.out) if wide else (f"fp16deq_{VEC16}_{fmt}", 8)

    def _rows(self, case: Case, dev: Mapping[str, Any]) -> Any:
        """The source rows of the case: a view that starts `row0` rows into the tensor."""
        row0 = self.geometry(case)["row0"]
        return dev["w"][row0: row0 + case.rows]

    def _launch_path(self, case: Case, variant: str, path: str, kernels: Any, dev: Mapping[str, Any],
                     outs: Mapping[str, Any], stream: Any) -> None:
        """Launch the `path` kernel (recorded in dispatch_log) over the case's rows."""
        self.dispatch_log[(case.name, variant)] = path
        self._launch_kernel(case, f"fp16deq_{path}_{case.fmt}", 32 if path == GENERIC else 8, kernels, dev, outs,
                            stream)

    def launch_wide(self, case: Case, variant: str, config: WideConfig, kernels: Any, dev: Mapping[str, Any],
                    outs: Mapping[str, Any], stream: Any = None) -> None:
        """"new"'s dispatch, with `config`'s kernel in place of vec16 for its format (dispatch_log: its label)."""
        path = choose_kernel(case.fmt, outs["y"].data.ptr, self.geometry(case)["ld"], self._rows(case, dev).data.ptr)
        if path != VEC16 or config.fmt != case.fmt:
            self._launch_dispatched(case, variant, path, kernels, dev, outs, stream)
            return
        self.dispatch_log[(case.name, variant)] = config.label
        self._launch_kernel(case, config.kernel, config.out, kernels, dev, outs, stream)

    def _launch_dispatched(self, case: Case, variant: str, path: str, kernels: Any, dev: Mapping[str, Any],
                           outs: Mapping[str, Any], stream: Any) -> None:
        """The kernel "new" runs for `path`: generic, or the format's 16-byte-store kernel (_vec16_kernel)."""
        if path != VEC16:
            self._launch_path(case, variant, path, kernels, dev, outs, stream)
            return
        self.dispatch_log[(case.name, variant)] = VEC16
        self._launch_kernel(case, *self._vec16_kernel(case.fmt), kernels, dev, outs, stream)

    def _launch_kernel(self, case: Case, kernel: str, per_thread: int, kernels: Any, dev: Mapping[str, Any],
                       outs: Mapping[str, Any], stream: Any) -> None:
        threads = case.rows * case.cols // per_thread
        fn = kernels.get(kernel)
        fn((ceil_div(threads, THREADS),), (THREADS,),
           (self._rows(case, dev), np.int32(case.rows), np.int32(case.cols), outs["y"],
            np.int64(self.geometry(case)["ld"])), stream=stream)

    def _launch_old(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        self._launch_path(case, "old", GENERIC, kernels, dev, outs, stream)

    def _launch_new(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        path = choose_kernel(case.fmt, outs["y"].data.ptr, self.geometry(case)["ld"], self._rows(case, dev).data.ptr)
        expected = case.param("path")
        if expected is not None and path != expected:
            raise CheckFailed(f"{case.name}: the dispatcher chose the {path} kernel, the case requires {expected}")
        self._launch_dispatched(case, "new", path, kernels, dev, outs, stream)

    variants = (
        Variant("old", _old_kernels, _launch_old, "the generic kernel: one thread per 32 values"),
        Variant("new", new_kernels, _launch_new, "the production entry point: 16-byte stores where aligned"),
    )

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "fp16deq")."""
        return FP16DEQ_ABI

    # --- reference --------------------------------------------------------------------------------
    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        geo = self.geometry(case)
        ref = np.full((case.rows, geo["ld"]), np.nan)
        ref[:, : case.cols] = exact_fp16(case.fmt, host["w"][geo["row0"]: geo["row0"] + case.rows])
        return [Expected("y", ref, 0.0, label="f64 exact -> fp16 RNE",
                         why="each value is exact in fp32 and rounded once (fp16deq.cu contract)")]

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        row, col = index
        values, _ = FORMATS[case.fmt]
        return (f"row {row + self.geometry(case)['row0']} of the tensor, column {col} "
                f"(block {col // values}, value {col % values})")

    def bytes_moved(self, case: Case) -> int:
        geo = self.geometry(case)
        return case.rows * geo["row_bytes"] + case.rows * case.cols * 2


# --- the launch ABI of TOML variants (docs/ABI.md) ------------------------------------------------------
def _abi_fields(case: Case) -> dict[str, int]:
    geo = Fp16Deq.geometry(case)
    return {"rows": case.rows, "cols": case.cols, "ld": geo["ld"], "row_bytes": geo["row_bytes"],
            "values": case.rows * case.cols}


FP16DEQ_ABI = LaunchAbi(
    family="fp16deq",
    args=(
        AbiArg("src", "const uint8_t*", "rows x row_bytes of blocks, contiguous (row stride row_bytes, no padding), "
                                        "starting `row0` rows into the tensor: only 2-byte aligned for Q8_0 "
                                        "(34-byte blocks), 8-byte for IQ4_XS; readable up to the tensor's end",
               lambda c, d, o: Fp16Deq()._rows(c, d)),
        AbiArg("rows", "int", "rows to convert", lambda c, d, o: np.int32(c.rows)),
        AbiArg("cols", "int", "values per row", lambda c, d, o: np.int32(c.cols)),
        AbiArg("y", "__half*", "[rows][ld] fp16: the first cols of each row written, the padding (ld - cols) "
                               "never; y may start 2 bytes past 16-byte alignment (case param offset)",
               lambda c, d, o: o["y"]),
        AbiArg("ld", "long long", "halves from one output row to the next (>= cols)",
               lambda c, d, o: np.int64(Fp16Deq.geometry(c)["ld"])),
    ),
    field_names=("rows", "cols", "ld", "row_bytes", "values"),
    fields=_abi_fields,
    placeholder_sets=tuple({"fmt": f} for f in FORMATS),
    placeholders=lambda case: {"fmt": case.fmt},
    baseline="old",
    writes="y: the first cols halves of each of the rows, the correctly rounded fp16 of each value; padding "
           "untouched",
)


# fp16 scale bits for the last row's first blocks in edge data: subnormal (smallest, small, largest,
# negative) and the smallest normal. With random codes their products land in fp16's subnormal range,
# which the format's own edge blocks (loudest codes) do not reach for IQ4_XS.
SUBNORMAL_SCALE_BITS = np.array([0x0001, 0x0002, 0x0003, 0x0005, 0x03FF, 0x8001, 0x8200, 0x0400], dtype=np.uint16)


def with_subnormal_scales(fmt: str, raw: np.ndarray) -> np.ndarray:
    """Edge data: overwrite the d field (bytes 0-1 in both formats) of the last row's first blocks."""
    _, nbytes = FORMATS[fmt]
    out = np.array(raw, dtype=np.uint8, copy=True)
    last = out[-1].reshape(-1, nbytes)
    count = min(len(SUBNORMAL_SCALE_BITS), len(last))
    last[:count, :2] = SUBNORMAL_SCALE_BITS[:count, None].view(np.uint8).reshape(-1, 2)[:count]
    return out


def exact_fp16(fmt: str, raw: np.ndarray) -> np.ndarray:
    """The exact values rounded to float16 (nearest even, overflow -> inf), as float64."""
    from strata_bench.formats import get_format

    exact = get_format(fmt).dequantize_f64(raw)
    with np.errstate(over="ignore"):
        return exact.astype(np.float16).astype(np.float64)
