"""mmvq: quantized weights x 1..N activation columns, y[c][row] = sum_k W[row][k] x[c][k].

Kernels: kernels_src/mmvq/mmvq.cu (`mmvq_old<F>`, `mmvq_new<F, NC, R>`) after `quantize_q8_1` (q8_1.cu).
Each launch quantizes the float32 activations to q8_1 on the device first (as llama.cpp's MMVQ path does,
so bench times compare with PEER.md's figures), then runs the variant:
- old: one warp per row; for each column the row is re-read and every chunk decoded again (the format's
  dot called once per column), tables in global memory;
- new: R rows per warp, tables and the pass's activations in shared memory; each weight chunk is decoded
  once and applied to NC = 8, 4, 2 or 1 columns per pass (column_passes: 11 = 8 + 2 + 1); the 8-column
  passes of iq4_nl, iq4_xs, q8_0, iq1_s, iq2_xxs, iq1_m, iq2_xs, iq2_s, iq3_xxs and iq3_s on tall shapes run
  mmvq_mma instead (mmvq/mmvq_mma.cu, tensor-core chunk integers, iq1_s's, iq2_xxs's, iq1_m's, iq2_xs's and
  iq2_s's with the lane-pair decode, the last three with two m16n8k16 mmas a chunk; mmvq_mma.py says where),
  and the one-column passes of iq2_xxs, iq1_s and iq1_m on tall shapes run mmvq_onecol (mmvq/mmvq_onecol.cu,
  fewer instructions a weight; mmvq_onecol.py says where).
Both keep the lane -> chunk mapping, the per-(row, column) fmaf chain and the butterfly, so `new` must
equal `old` bitwise (mmvq.cu's ARITHMETIC CONTRACT), and every column of an N-column call must equal the
1-column call on that column's activations (related_cases, case param col=j).

Weights live on the device at a 16-byte aligned row stride with 16 readable bytes after the last row.
Activations: a fixed seeded draw of 11 columns per (shape, data); an N-column case uses the first N.

Float64 references (docs/ARITHMETIC.md, section 3, derives the tolerances):
- "f64(q8_1 acts)": exact weights x q8_1-dequantized activations; tol, each output's own bound:
  gamma_h * sum_k |w_k| |xq_k| + gamma64_K * (same), h = ceil(K/32/32) - 1 + 5 roundings per term.
- "f64(raw acts)": exact weights x raw activations; adds sum_k |w_k| E_k, E the a-priori q8_1 rounding
  bound of k's block, and float64's gamma64_K * sum |w||x|.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Iterable, Mapping

import numpy as np

from strata_bench.kit import (KERNEL_FORMATS, Q2_0_FIXTURE_SOURCE, Q8_1_BYTES, AbiArg, Case, Expected, Family,
                              FixtureRef, InputError, LaunchAbi, MatvecRef, padded_row_args, fixture_ref, Variant,
                              activations,
                              allow_dynamic_shared, ceil_div, check_shape, compute_major, exact_weights,
                              foreign_matvec_reference, launch_quantize_q8_1, matvec_reference, padded, parse_data,
                              q8_1_staging_bytes, quantize_q8_1, resident_blocks, row_stride, shared_optin, traits,
                              weights)

from strata_bench.kernels.constants import MMVQ_OLD_WARPS as OLD_WARPS
from strata_bench.kernels.constants import MMVQ_NEW_WARPS as NEW_WARPS
from strata_bench.kernels.constants import MMVQ_NEW_MIN_BLOCKS_ONE, MMVQ_NEW_MIN_BLOCKS_WIDE
from strata_bench.families.mmvq_foreign import FOREIGN_FIXTURE_NCOLS, foreign_expected, foreign_shapes
from strata_bench.families.mmvq_decoders import DECODERS, Decoder, decoder_table_bytes, decoder_traits
from strata_bench.families.mmvq_mma import (MMA_SOURCE, MmaConfig, launch_mma_pass, mma_config,
                                            mma_kernels)
from strata_bench.families.mmvq_onecol import (ONECOL_SOURCE, OneColConfig, launch_onecol_pass, onecol_config,
                                               onecol_kernels)


@dataclass(frozen=True)
class NewConfig:
    """How one column pass of mmvq_new is launched: R rows per warp (rows sharing one load of each
    activation block), the blocks per SM its register budget allows (None: the kernel's default,
    MMVQ_NEW_MIN_BLOCKS) and the chunk loop's unroll (0: the compiler's choice). None of them touches
    the arithmetic (mmvq.cu), so every config gives the same bits."""

    rows: int = 4
    min_blocks: int | None = None
    unroll: int = 0
    fcvt: bool = False  # the chunk's integer reaches the fmaf as chunk_isum_f (iq_decode.cuh): no I2F, no IMAD
    old: bool = False  # the pass runs mmvq_old instead (bitwise equal; faster where it is, measured)
    # a decoder in place of the format's own (the same integers): a name in mmvq_decoders.DECODERS, or an
    # experiment's own Decoder
    decoder: str | Decoder = ""

    def kernel(self, fmt: str, nc: int) -> str:
        """The name expression; the defaults are left out, so the untuned kernels keep their names."""
        if self.old:
            return f"mmvq_old<{traits(fmt)}>"
        tail = ""
        if self.min_blocks is not None or self.unroll or self.fcvt:
            tail = f", {self.min_blocks_for(nc)}, {self.unroll}" + (", true" if self.fcvt else "")
        return f"mmvq_new<{decoder_traits(self.decoder, fmt)}, {nc}, {self.rows}{tail}>"

    def min_blocks_for(self, nc: int) -> int:
        if self.min_blocks is not None:
            return self.min_blocks
        return MMVQ_NEW_MIN_BLOCKS_ONE if nc == 1 else MMVQ_NEW_MIN_BLOCKS_WIDE

    @property
    def label(self) -> str:
        if self.old:
            return "old"
        shape = f"r{self.rows}m{self.min_blocks or 0}u{self.unroll}" + ("f" if self.fcvt else "")
        if not self.decoder:
            return shape
        return f"{shape}-{self.decoder.name if isinstance(self.decoder, Decoder) else self.decoder}"


NEW_DEFAULT = NewConfig()
# Per format and pass width, the fastest config of the sweeps on the H200 at 131072 x 8192 that spills no
# register under the device's NVRTC or CI's (experiments/mmvq_tune; docs/PERF_NOTES.md, "v3" and "v4", has
# every figure). NewConfig(R, MINB, U, FCVT); old=True runs mmvq_old's kernel for the pass, where it is
# the faster one (bitwise equal); decoder= names the decoder it runs in place of the format's own
# (mmvq_decoders.py; v5: the one-column passes of iq2_xxs, iq2_xs, iq3_xxs and iq3_s; v7: the iq3 ones with
# 16 interleaved table copies).
_C = NewConfig
NEW_CONFIGS: dict[tuple[str, int], NewConfig] = {
    ("iq2_xxs", 1): _C(2, 4, 8, decoder="lean"), ("iq2_xs", 1): _C(4, 3, 4, decoder="lean"),
    ("iq2_s", 1): _C(2, 3, 8), ("iq3_xxs", 1): _C(4, 3, 4, decoder="masked-split-rep16"),
    ("iq3_s", 1): _C(2, 4, 2, decoder="masked-rep16"), ("iq1_s", 1): _C(4, 3, 4), ("iq1_m", 1): _C(2, 3, 8),
    ("iq4_nl", 1): _C(old=True),
    ("iq4_xs", 1): _C(4, 2, 4), ("q8_0", 1): _C(old=True), ("q2_0", 1): _C(4, 3, 4),
    ("iq2_xxs", 2): _C(4, 2, 4), ("iq2_xs", 2): _C(2, 3, 4), ("iq2_s", 2): _C(4, 2, 4), ("iq3_xxs", 2): _C(4, 2, 2),
    ("iq3_s", 2): _C(4, 2, 2), ("iq1_s", 2): _C(4, 2, 4), ("iq1_m", 2): _C(4, 2, 4), ("iq4_nl", 2): _C(2, 2, 4),
    ("iq4_xs", 2): _C(4, 2, 4), ("q8_0", 2): _C(2, 2, 4), ("q2_0", 2): _C(2, 3, 4),
    ("iq2_xxs", 4): _C(2, 2, 4), ("iq2_xs", 4): _C(2, 2, 4), ("iq2_s", 4): _C(2, 2, 4), ("iq3_xxs", 4): _C(4, 2, 2),
    ("iq3_s", 4): _C(2, 2, 4), ("iq1_s", 4): _C(4, 2, 2), ("iq1_m", 4): _C(2, 2, 4), ("iq4_nl", 4): _C(2, 2, 4),
    ("iq4_xs", 4): _C(2, 2, 4), ("q8_0", 4): _C(2, 2, 2), ("q2_0", 4): _C(2, 3, 2),
    ("iq2_xxs", 8): _C(2, 2, 4, True), ("iq2_xs", 8): _C(2, 2, 4, True), ("iq2_s", 8): _C(2, 2, 4, True),
    ("iq1_s", 8): _C(4, 2, 0, True), ("iq1_m", 8): _C(2, 2, 2), ("iq4_xs", 8): _C(2, 2, 4, True),
    ("q2_0", 8): _C(2, 2, 4, True)}


def new_config(fmt: str, nc: int) -> NewConfig:
    """The launch of mmvq_new for a format and a pass of nc columns."""
    return NEW_CONFIGS.get((fmt, nc), NEW_DEFAULT)


def rows_per_warp(fmt: str, nc: int) -> int:
    """R of mmvq_new<F, NC, R> for a format and a pass of nc columns."""
    return new_config(fmt, nc).rows
MAX_COLUMNS = 11  # activations are drawn for this many columns; a case uses the first ncols
DEFAULT_NCOLS = (1, 2, 3, 4, 5, 6, 7, 8, 11)
SHAPES = ((8192, 2560), (16384, 512))  # the shape; a tall one where half the lanes have no chunk
EDGE_SHAPE = (512, 2560)  # edge blocks sit at the start of the matrix: a small shape covers them
FIXTURE_NCOLS = (1, 3, 8, 11)
EDGE_NCOLS = (1, 4, 11)
BENCH_SHAPES = ((131072, 8192), (4096, 14336))  # PEER.md's DRAM shape and its built-in shape
BENCH_NCOLS = (1, 2, 4, 8)
# Parity shapes where new's 8-column pass runs mmvq_mma (mmvq_mma.MMA_CONFIGS' min_rows), short rows to keep
# the host data small: 32 chunks give each of a tile group's 4 warps one group, 8 chunks leave 3 warps idle.
MMA_SHAPES = {"iq4_nl": (32768, 1024), "iq4_xs": (32768, 1024), "q8_0": (131072, 256), "iq1_s": (131072, 1024),
              "iq2_xxs": (131072, 1024), "iq1_m": (32768, 1024), "iq2_xs": (32768, 1024), "iq2_s": (32768, 1024),
              "iq3_xxs": (32768, 1024), "iq3_s": (32768, 1024)}
MMA_NCOLS = (8, 11)
# Tails (docs/TAIL_PATHS.md): 37 rows = 2 x 16 + 5 leave every pass a last, partial row group (mmvq_new: 8 warps
# x R = 16 or 32 rows; mmvq_old: 4 rows a block); 40 chunks leave lanes 8-31 one step fewer; 4 and 11 columns
# run the passes of every width (4; 8 + 2 + 1).
TAIL_SHAPE = (37, 1280)
TAIL_NCOLS = (4, 11)
# The tensor-core pass's tails, at min_rows + 5 rows (a last tile of 5 rows): iq4_nl and q8_0 at 9 chunks (warp 0
# a whole 8-chunk group, warp 1 a partial group of one chunk), the super-block formats (iq4_xs, iq1_s, iq2_xxs,
# iq1_m, iq2_xs, iq2_s, iq3_xxs, iq3_s) at one super-block (warps 1-3 no group).
MMA_TAIL_SHAPES = {"iq4_nl": (32773, 288), "iq4_xs": (32773, 256), "q8_0": (131077, 288), "iq1_s": (131077, 256),
                   "iq2_xxs": (131077, 256), "iq1_m": (32773, 256), "iq2_xs": (32773, 256), "iq2_s": (32773, 256),
                   "iq3_xxs": (32773, 256), "iq3_s": (32773, 256)}
# The one-column pass on mmvq_onecol (mmvq_onecol.ONECOL_CONFIGS: iq2_xxs, iq1_s, iq1_m; min_rows 131072) gets
# a case at one column on each of the weight sets above (no more host data; onecol_cases): MMA_SHAPES' 131072 x
# 1024, whole row groups and 32 chunks (every lane one), and MMA_TAIL_SHAPES' 131077 x 256, a last row group of 5
# rows (iq2_xxs's R = 2: warp 2 a row and a clamped one; iq1_s's R = 4: warp 1 a row and three clamped) and 8 chunks
# (lanes 8-31 none). 11 columns (8 + 2 + 1) end in such a pass too. A format whose tensor-core weight sets are
# shorter than its mmvq_onecol min_rows gets tall cases of its own (ONECOL_SHAPES: rows, cols, columns): iq1_m at
# 131072 x 256, one column and 11 (passes 8 on mmvq_mma, 2 on mmvq_new, 1 on mmvq_onecol), and 131077 x 256 (a
# last row group of 5).
ONECOL_SHAPES = {"iq1_m": ((131072, 256, 1), (131072, 256, 11), (131077, 256, 1))}


def column_passes(ncols: int) -> list[int]:
    """Columns per pass of the new kernels: 8 at a time, then the binary digits of the rest (1, 2, 4)."""
    passes = [8] * (ncols // 8)
    rest = ncols % 8
    passes += [p for p in (4, 2, 1) if rest & p]
    return passes


def fixture_name(fmt: str) -> str:
    """The shipped real-weight fixture of a format (q2_0 requantizes the q8_0 one)."""
    return f"smollm2-ffn_down.{Q2_0_FIXTURE_SOURCE if fmt == 'q2_0' else fmt}"


class Mmvq(Family):
    name = "mmvq"
    sources = ("q8_1/q8_1.cu", "mmvq/mmvq.cu", MMA_SOURCE, ONECOL_SOURCE)
    own_formats = KERNEL_FORMATS  # a variant declaring others (an engine's q4_k) gets cases of those for itself
    description = "i-quant/q8_0/q2_0 mat-vec over q8_1, 1-11 columns: dot per column (old) vs decode once (new)"

    # --- what a family extending mmvq builds on (kit.builtin_family("mmvq"); docs/EXTENDING.md, "Extending a
    # built-in family"), beside the public methods edge_and_fixture_cases, quantize_activations,
    # launch_new_pass, launch_new_passes, launch_mma_pass and launch_onecol_pass --------------------------
    NewConfig = NewConfig  # a launch of mmvq_new for one column pass (R, MINB, U, FCVT, old, decoder)
    new_config = staticmethod(new_config)  # (fmt, nc) -> the NewConfig `new` launches
    column_passes = staticmethod(column_passes)  # ncols -> the pass widths (8, 8, ..., 4, 2, 1)
    Decoder = Decoder  # a decoder mmvq_new may run in place of a format's own
    DECODERS = DECODERS  # the ones NEW_CONFIGS names, by name
    MmaConfig = MmaConfig  # a launch of mmvq_mma for an 8-column pass (tile groups, stages, ...)
    OneColConfig = OneColConfig  # a launch of mmvq_onecol for a one-column pass (decoder, R, MINB, U, min_rows)
    SHAPES = SHAPES  # the parity shapes of the seeded cases

    # --- cases ------------------------------------------------------------------------------------
    def default_cases(self) -> Iterable[Case]:
        cases = []
        for fmt in KERNEL_FORMATS:
            for rows, cols in SHAPES:
                cases += [self.case(fmt, rows, cols, n, "seed:1") for n in DEFAULT_NCOLS]
            cases += self.edge_and_fixture_cases(fmt, EDGE_NCOLS)
            if fmt in MMA_SHAPES:
                cases += [self.case(fmt, *MMA_SHAPES[fmt], n, "seed:1") for n in MMA_NCOLS]
                cases += self.onecol_cases(fmt, MMA_SHAPES)
            cases += [self.case(fmt, *TAIL_SHAPE, n, "seed:1") for n in TAIL_NCOLS]
            if fmt in MMA_TAIL_SHAPES:
                cases.append(self.case(fmt, *MMA_TAIL_SHAPES[fmt], 8, "seed:1"))
                cases += self.onecol_cases(fmt, MMA_TAIL_SHAPES)
            cases += [self.case(fmt, rows, cols, n, "seed:1") for rows, cols, n in ONECOL_SHAPES.get(fmt, ())]
        for fmt in self.foreign_formats():
            cases += self.foreign_cases(fmt)
        return cases

    def onecol_cases(self, fmt: str, shapes: Mapping[str, tuple[int, int]]) -> list[Case]:
        """A format's one-column case at shapes[fmt] where its one-column pass runs mmvq_onecol there (listed
        right after that weight set's other cases: the family caches one weight set at a time)."""
        rows, cols = shapes[fmt]
        return [self.case(fmt, rows, cols, 1, "seed:1")] if onecol_config(fmt, 1, rows) is not None else []

    def foreign_cases(self, fmt: str) -> list[Case]:
        """The cases of a format only a foreign variant runs (mmvq_foreign.foreign_shapes), then its shipped
        real rows at FOREIGN_FIXTURE_NCOLS."""
        cases = [self.case(fmt, rows, cols, n, "seed:1") for rows, cols, n in foreign_shapes(fmt)]
        shipped = fixture_ref(fixture_name(fmt))
        if shipped is not None:
            cases += self.fixture_cases(shipped, FOREIGN_FIXTURE_NCOLS, fmt=fmt)
        return cases

    def grid_cases(self, formats: Iterable[str], shapes: Iterable[tuple[int, int]],
                   ncols: tuple[int, ...]) -> list[Case]:
        """Each format's seeded cases over every shape x column count, then its edge and fixture cases at
        the same counts (an extending family's parity grid)."""
        shapes = tuple(shapes)
        cases = []
        for fmt in formats:
            cases += [self.case(fmt, rows, cols, n, "seed:1") for rows, cols in shapes for n in ncols]
            cases += self.edge_and_fixture_cases(fmt, ncols, ncols)
        return cases

    def edge_and_fixture_cases(self, fmt: str, edge_ncols: tuple[int, ...],
                               fixture_ncols: tuple[int, ...] | None = None) -> list[Case]:
        """A format's edge-block cases (EDGE_SHAPE) at edge_ncols, then its shipped fixture's (if any) at
        fixture_ncols (None: FIXTURE_NCOLS)."""
        cases = [self.case(fmt, *EDGE_SHAPE, n, "edge:2") for n in edge_ncols]
        shipped = fixture_ref(fixture_name(fmt))
        if shipped is not None:
            cases += self.fixture_cases(shipped, fixture_ncols, fmt=fmt)
        return cases

    def fixture_cases(self, fixture: FixtureRef, ncols: tuple[int, ...] | None = None,
                      fmt: str | None = None) -> list[Case]:
        """The fixture's rows x 1, 3, 8 and 11 columns (or --cols), in its format; q2_0 from q8_0 rows. A format
        only a foreign variant runs takes its own rows, at 1, 3 and 8 columns (an engine's kernels take 8 at
        most)."""
        fmt = fmt or fixture.fmt
        takes = fmt == fixture.fmt or (fmt == "q2_0" and fixture.fmt == Q2_0_FIXTURE_SOURCE)
        known = fmt in KERNEL_FORMATS or (fmt == fixture.fmt and fmt in self.foreign_formats())
        if not known or not takes or fixture.cols % 32:
            return []
        if fmt != fixture.fmt:
            from strata_bench.formats import get_format

            if fixture.cols % get_format(fmt).block_size:
                return []
        for n in ncols or ():
            if not 1 <= n <= MAX_COLUMNS:
                raise InputError(f"mmvq: --cols {n}: 1 to {MAX_COLUMNS} columns")
        default = FIXTURE_NCOLS if fmt in KERNEL_FORMATS else FOREIGN_FIXTURE_NCOLS
        return [self.case(fmt, fixture.rows, fixture.cols, n, fixture.data) for n in ncols or default]

    def bench_cases(self) -> Iterable[Case]:
        """The built-in formats', then each foreign format's, at BENCH_SHAPES (multiples of 256) x BENCH_NCOLS."""
        return [self.case(fmt, r, k, n, "seed:1") for fmt in (*KERNEL_FORMATS, *self.foreign_formats())
                for r, k in BENCH_SHAPES for n in BENCH_NCOLS]

    def related_cases(self, case: Case) -> list[tuple[Case, str, Any]]:
        """Column j of an N-column call equals the 1-column call on column j's activations.

        Checked for every column of the issue's shape and of the fixtures (the column passes do not
        depend on the shape; the tall and edge cases still compare old and new bitwise). Not for a format only
        a foreign variant runs: no contract of this project says how an engine's kernel treats columns."""
        checked = (case.rows, case.cols) == SHAPES[0] or case.data.startswith("fixture")
        if case.fmt not in KERNEL_FORMATS or case.ncols == 1 or case.param("col") is not None or not checked:
            return []
        out = []
        for j in range(case.ncols):
            other = replace(case, ncols=1, params=(("col", j),))
            out.append((other, "y", lambda outs, j=j: outs["y"][j:j + 1]))
        return out

    # --- data ---------------------------------------------------------------------------------------
    def make_inputs(self, case: Case) -> dict[str, Any]:
        check_shape(case.fmt, case.cols)
        if not 1 <= case.ncols <= MAX_COLUMNS:
            raise InputError(f"mmvq: 1 to {MAX_COLUMNS} columns, got {case.ncols}")
        data = _weight_data(case.fmt, case.rows, case.cols, case.data)
        col = case.param("col")
        cols = slice(col, col + 1) if col is not None else slice(0, case.ncols)
        x = data["x"][cols]
        return {"raw": data["raw"], "padded": data["padded"], "x": x, "act": data["act"][cols],
                "cols": cols, "note": data["note"]}

    def to_device(self, case: Case, host: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        nchunks = case.cols // 32
        return {"w": _device_weights(host["padded"], cupy.cuda.Device().id),
                "x": cupy.asarray(host["x"]),
                "xq": cupy.empty((case.ncols, nchunks * Q8_1_BYTES), dtype=cupy.uint8)}

    def alloc_outputs(self, case: Case, dev: Mapping[str, Any]) -> dict[str, Any]:
        import cupy

        return {"y": cupy.empty((case.ncols, case.rows), dtype=cupy.float32)}

    # --- launch ---------------------------------------------------------------------------------------
    def family_kernels(self, source: str) -> list[str]:
        """quantize_q8_1: both variants quantize the activations first."""
        if source == "q8_1/q8_1.cu":
            return ["quantize_q8_1"]
        return []

    def _old_kernels(self, source: str) -> list[str]:
        return [f"mmvq_old<{traits(fmt)}>" for fmt in KERNEL_FORMATS] if source == Mmvq.sources[1] else []

    def _new_kernels(self, source: str) -> list[str]:
        if source == MMA_SOURCE:
            return mma_kernels(source)
        if source == ONECOL_SOURCE:
            return onecol_kernels(source)
        if source != Mmvq.sources[1]:
            return []
        return [new_config(fmt, nc).kernel(fmt, nc) for fmt in KERNEL_FORMATS for nc in (1, 2, 4, 8)]

    def quantize_activations(self, case: Case, kernels: Any, dev: Mapping[str, Any], stream: Any = None) -> None:
        """quantize_q8_1 of all the case's columns (dev["x"] -> dev["xq"]): every variant's first launch."""
        launch_quantize_q8_1(kernels, dev["x"], dev["xq"], case.ncols * (case.cols // 32), stream)

    def launch_mma_pass(self, config: MmaConfig, case: Case, kernels: Any, dev: Mapping[str, Any],
                        outs: Mapping[str, Any], col0: int, stream: Any = None) -> None:
        """One 8-column pass over columns col0 .. col0 + 8 on the tensor cores (mmvq_mma), launched as
        `config` says (mmvq_mma.launch_mma_pass)."""
        launch_mma_pass(config, case.fmt, case.rows, case.cols, kernels, dev, outs, col0, stream)

    def launch_onecol_pass(self, config: Any, case: Case, kernels: Any, dev: Mapping[str, Any],
                           outs: Mapping[str, Any], col0: int, stream: Any = None) -> None:
        """One one-column pass over column col0 on mmvq_onecol, launched as `config` says (a OneColConfig, or an
        experiment's launch with its kernel, rows, dynamic_bytes and static_bytes: mmvq_onecol.launch_onecol_pass)."""
        launch_onecol_pass(config, case.fmt, case.rows, case.cols, kernels, dev, outs, col0, stream)

    def _launch_old(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        self.quantize_activations(case, kernels, dev, stream)
        self._launch_old_pass(case, kernels, dev, outs, 0, case.ncols, stream)

    def _launch_old_pass(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                         col0: int, nc: int, stream: Any) -> None:
        """mmvq_old over columns col0 .. col0 + nc (all of them for the old variant)."""
        nchunks = case.cols // 32
        stride = np.int64(row_stride(case.fmt, case.cols))
        fn = kernels.get(f"mmvq_old<{traits(case.fmt)}>")
        grid = (ceil_div(case.rows, OLD_WARPS),)
        fn(grid, (32 * OLD_WARPS,), (dev["w"], stride, np.int32(case.rows), np.int32(nchunks),
                                      dev["xq"][col0:col0 + nc], np.int32(nc), outs["y"][col0:col0 + nc]),
           stream=stream)

    def _launch_new(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                    stream: Any = None) -> None:
        self.launch_new_passes(case, kernels, dev, outs, new_config, stream, tensor_cores=True, one_column=True)

    def launch_new_passes(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                          config_of, stream: Any = None, tensor_cores: bool = False, mma_of=None,
                          one_column: bool = False) -> None:
        """Quantize the activations, then one launch per column pass: mmvq_new as config_of(fmt, nc) says,
        or with `tensor_cores` mmvq_mma where mmvq_mma.mma_config says (the launch candidates of
        experiments/mmvq_tune leave it off, so that they time their own configs), or where `mma_of` is given
        where mma_of(fmt, nc, nchunks) returns a launch (an MmaConfig: an experiment's tensor-core candidate);
        with `one_column` mmvq_onecol where mmvq_onecol.onecol_config says."""
        self.quantize_activations(case, kernels, dev, stream)
        col0 = 0
        for nc in column_passes(case.ncols):
            if mma_of is not None:
                mma = mma_of(case.fmt, nc, case.cols // 32)
            else:
                mma = (mma_config(case.fmt, nc, case.rows, case.cols // 32, compute_major, shared_optin)
                       if tensor_cores else None)
            onecol = onecol_config(case.fmt, nc, case.rows) if one_column else None
            if mma is not None:
                launch_mma_pass(mma, case.fmt, case.rows, case.cols, kernels, dev, outs, col0, stream)
            elif onecol is not None:
                launch_onecol_pass(onecol, case.fmt, case.rows, case.cols, kernels, dev, outs, col0, stream)
            else:
                self.launch_new_pass(case, kernels, dev, outs, col0, nc, config_of(case.fmt, nc), stream)
            col0 += nc

    def launch_new_pass(self, case: Case, kernels: Any, dev: Mapping[str, Any], outs: Mapping[str, Any],
                        col0: int, nc: int, config: NewConfig, stream: Any = None) -> None:
        """One column pass of `new`'s kind over columns col0 .. col0 + nc as `config` says: mmvq_new (or
        mmvq_old where config.old), reading the q8_1 activations quantize_activations wrote."""
        nchunks = case.cols // 32
        if config.old:
            self._launch_old_pass(case, kernels, dev, outs, col0, nc, stream)
            return
        r = config.rows
        fn = kernels.get(config.kernel(case.fmt, nc))
        shared = q8_1_staging_bytes(nc, nchunks)
        allow_dynamic_shared(fn, shared, static_bytes=decoder_table_bytes(config.decoder, case.fmt))
        groups = ceil_div(case.rows, NEW_WARPS * r)
        grid = (min(groups, resident_blocks(fn, 32 * NEW_WARPS, shared)),)
        args = (dev["w"], np.int64(row_stride(case.fmt, case.cols)), np.int32(case.rows), np.int32(nchunks),
                dev["xq"][col0:col0 + nc], outs["y"][col0:col0 + nc], np.int32(case.rows))
        fn(grid, (32 * NEW_WARPS,), args, shared_mem=shared, stream=stream)

    variants = (
        Variant("old", _old_kernels, _launch_old, "one warp per row, the row decoded again for every column"),
        Variant("new", _new_kernels, _launch_new, "R rows per warp, each chunk decoded once for NC columns; "
                "launch tuned per format and pass (NEW_CONFIGS: mmvq_old where it is faster; mmvq_mma for "
                "tall 8-column passes of the formats in MMA_CONFIGS (iq4_nl, iq4_xs, q8_0 and the seven 1-3-bit "
                "ones); mmvq_onecol for tall one-column "
                "iq2_xxs (mul7), iq1_s (tern) and iq1_m (selector table) passes)"),
    )

    def launch_abi(self) -> LaunchAbi:
        """What a TOML variant receives (docs/ABI.md, "mmvq"): q8_1 activations already quantized."""
        return MMVQ_ABI

    # --- reference ------------------------------------------------------------------------------------
    def reference(self, case: Case, host: Mapping[str, Any]) -> list[Expected]:
        ref = _matvec(case.fmt, case.rows, case.cols, case.data)
        cols = host["cols"]
        if case.fmt not in KERNEL_FORMATS:
            return foreign_expected(ref, cols)
        # Each output against its own bound (they differ by orders of magnitude between rows).
        return [
            Expected("y", ref.y_q[cols], ref.bound_q[cols], label="f64(q8_1 acts)",
                     why="gamma_h * sum|w||xq| (exact chunk terms, fmaf chain + butterfly) + gamma64_K"),
            Expected("y", ref.y_raw[cols], ref.bound_raw[cols], label="f64(raw acts)",
                     why="q8_1 acts bound + sum|w_k| E_k (a-priori q8_1 rounding) + gamma64_K"),
        ]

    def describe_index(self, case: Case, output: str, index: tuple[int, ...]) -> str:
        col, row = index
        return f"column {col}, row {row}"

    def bytes_moved(self, case: Case) -> int:
        from strata_bench.formats import get_format

        nchunks = case.cols // 32
        weights = case.rows * get_format(case.fmt).bytes_per_row(case.cols)
        acts = case.ncols * (case.cols * 4 + 2 * nchunks * Q8_1_BYTES)  # read x, write and read q8_1
        return weights + acts + case.ncols * case.rows * 4

    def flops(self, case: Case) -> int:
        return 2 * case.rows * case.cols * case.ncols


# --- the launch ABI of TOML variants (docs/ABI.md) ------------------------------------------------------
def _abi_fields(case: Case) -> dict[str, int]:
    from strata_bench.formats import get_format

    fmt = get_format(case.fmt)
    # block_bytes and block_values: an engine's strides count blocks (exact_div(stride, block_bytes)).
    return {"rows": case.rows, "cols": case.cols, "ncols": case.ncols, "nchunks": case.cols // 32,
            "stride": row_stride(case.fmt, case.cols), "row_bytes": fmt.bytes_per_row(case.cols),
            "block_bytes": fmt.type_size, "block_values": fmt.block_size}


MMVQ_ABI = LaunchAbi(
    family="mmvq",
    args=(
        *padded_row_args("rows x row_bytes of blocks at `stride` (16-byte aligned); 16 readable bytes after the "
                         "last row", rows="weight rows (outputs per column)", cols="inputs per row"),
        AbiArg("xq", "const block_q8_1*", "[ncols][nchunks] q8_1 blocks (36 bytes), quantized before the kernel",
               lambda c, d, o: d["xq"]),
        AbiArg("x", "const float*", "[ncols][cols] float32 activations (raw)", lambda c, d, o: d["x"]),
        AbiArg("ncols", "int", "activation columns", lambda c, d, o: np.int32(c.ncols)),
        AbiArg("y", "float*", "[ncols][rows] float32 output, every element written", lambda c, d, o: o["y"]),
        AbiArg("y_stride", "int", "floats from one output column to the next (= rows)",
               lambda c, d, o: np.int32(c.rows)),
    ),
    field_names=("rows", "cols", "ncols", "nchunks", "stride", "row_bytes", "block_bytes", "block_values"),
    fields=_abi_fields,
    placeholder_sets=tuple({"traits": traits(f), "fmt": f} for f in KERNEL_FORMATS),
    placeholders=lambda case: {"traits": traits(case.fmt), "fmt": case.fmt},
    prelude=lambda family, case, kernels, dev, stream: family.quantize_activations(case, kernels, dev, stream),
    baseline="old",
    writes="y: all ncols x rows floats; bitwise equal to old (mmvq.cu's ARITHMETIC CONTRACT)",
)


# --- helpers -----------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _weight_data(fmt: str, rows: int, cols: int, data: str) -> dict[str, Any]:
    """Weights, the 11-column activation draw and its q8_1 blocks: made once per (format, shape, data)
    and shared by every column count (cases of one weight set are listed together, so one cached
    entry suffices)."""
    src = parse_data(data)
    raw, note = weights(fmt, rows, cols, src)
    x = activations(cols, MAX_COLUMNS, src)
    return {"raw": raw, "padded": padded(fmt, raw), "x": x, "act": quantize_q8_1(x), "note": note}


@lru_cache(maxsize=1)
def _matvec(fmt: str, rows: int, cols: int, data: str) -> MatvecRef:
    """The float64 references of all 11 columns, computed only when a parity check asks (bench never
    does: at 131072 x 8192 the float64 weights alone would take 8.6 GB)."""
    d = _weight_data(fmt, rows, cols, data)
    if fmt not in KERNEL_FORMATS:
        return foreign_matvec_reference(fmt, d["raw"], d["x"], d["act"])
    return matvec_reference(exact_weights(fmt, d["raw"], np.float32), d["x"], d["act"])


_DEVICE_CACHE: dict[tuple[int, int], Any] = {}


def _device_weights(padded: np.ndarray, device: int) -> Any:
    """The padded weights on `device`, uploaded once per host array (one entry per device)."""
    import cupy

    key = (id(padded), device)
    if key not in _DEVICE_CACHE:
        for old in [k for k in _DEVICE_CACHE if k[1] == device]:
            del _DEVICE_CACHE[old]
        _DEVICE_CACHE[key] = (padded, cupy.asarray(padded))  # keep the host array alive: id() stays unique
    return _DEVICE_CACHE[key][1]
