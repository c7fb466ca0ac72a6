"""mmvq_coal (issue 28, candidate (a)): mmvq_new's one-column pass of the iq3 formats with its weights copied
coalesced (kernels/mmvq_coal.cu), as a --cases file: a family `mmvq_coal`, the built-in mmvq with one variant
per candidate launch, so that parity checks each bitwise against old and bench times them beside new in one
run; nothing built-in changes.

    strata-bench compile --arch 90 --cases experiments/mmvq_coal/cases.py --family mmvq_coal --resources
    strata-bench parity --cases experiments/mmvq_coal/cases.py --family mmvq_coal
    strata-bench bench --cases experiments/mmvq_coal/cases.py --family mmvq_coal

A candidate runs mmvq_coal<D, R, MINB, U, FCVT, NB> for the one-column passes of iq3_xxs and iq3_s (D: the
decoder `new` runs there, NEW_CONFIGS) and new's launch for every other pass, so each variant runs every case.
The geometry (granules per step, slots per lane, shared bytes) is coal_geometry below, which mirrors the
kernel's CoalSeg/CoalCopy; tests/test_mmvq_coal.py checks it exactly against every lane's decode reads.
Only the public kit is used, and the built-in family's extension surface (docs/EXTENDING.md).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from strata_bench.kit import (Variant, allow_dynamic_shared, builtin_family, ceil_div, constants, decode_table_bytes,
                              extend_builtin, q8_1_staging_bytes, resident_blocks, row_stride, traits)

Mmvq = builtin_family("mmvq")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "mmvq_coal.cu"  # in KERNELS
WARPS = constants.MMVQ_NEW_WARPS  # the kernel's block is mmvq_new's
# The formats the kernel may run: each decode reads only bytes of its own block (iq3: ld_words_a2's last
# aligned word ends inside the block), so the granules covering a step's bytes hold everything it reads.
FORMATS = ("iq3_xxs", "iq3_s")
# (bytes per block, chunks per block) of each format (formats/<fmt>.cuh; the tests check them against the kit).
BLOCKS = {"iq3_xxs": (98, 8), "iq3_s": (110, 8)}


class CoalGeometry(NamedTuple):
    step: int  # bytes of a lane step (32 chunks) of a row: LaneWalk<F>::STEP
    max_phase: int  # the largest (s * step) % 16
    granules: int  # 16-byte granules that cover any step (CoalSeg::GRANULES)


def coal_geometry(fmt: str) -> CoalGeometry:
    """CoalSeg<F> of mmvq_coal.cu: a step's bytes start at phase (s * step) % 16, a multiple of the step's
    lowest set bit (capped at 16), so at most 16 minus that, and that many bytes plus the step fit in
    `granules` granules."""
    nbytes, chunks = BLOCKS[fmt]
    step = (32 // chunks) * nbytes
    unit = min(step & -step, 16)
    max_phase = 16 - unit
    return CoalGeometry(step, max_phase, ceil_div(max_phase + step, 16))


def slots(fmt: str, rows: int) -> int:
    """CoalCopy<F, R>::SLOTS: granules a lane copies per step."""
    return ceil_div(rows * coal_geometry(fmt).granules, 32)


def covered_granules(fmt: str, s: int, row_bytes: int) -> int:
    """The granules mmvq_coal fetches at step s of a row of row_bytes bytes (the kernel's `covered`)."""
    step = coal_geometry(fmt).step
    start = s * step
    return ((start & 15) + min(step, row_bytes - start) + 15) >> 4


class CoalConfig(NamedTuple):  # not a dataclass: a --cases file's module is not in sys.modules
    """A launch of mmvq_coal: R rows per warp, MINB blocks per SM (__launch_bounds__), the step loop's
    unroll U, FCVT, NB shared buffers per warp (1: a second __syncwarp per step; 2: none)."""

    rows: int
    min_blocks: int
    unroll: int
    buffers: int
    formats: tuple = FORMATS  # the formats whose one-column pass it runs (new's for the others)
    fcvt: bool = False

    @property
    def label(self) -> str:
        return f"coal-r{self.rows}m{self.min_blocks}u{self.unroll}b{self.buffers}" + ("f" if self.fcvt else "")

    def decoder_traits(self, fmt: str) -> str:
        """new's one-column decoder for fmt (NEW_CONFIGS: masked-split-rep16 / masked-rep16)."""
        dec = Mmvq.new_config(fmt, 1).decoder
        return Mmvq.DECODERS[dec].traits(fmt) if dec else traits(fmt)

    def kernel(self, fmt: str) -> str:
        return (f"mmvq_coal<{self.decoder_traits(fmt)}, {self.rows}, {self.min_blocks}, {self.unroll}, "
                f"{'true' if self.fcvt else 'false'}, {self.buffers}>")

    def dynamic_bytes(self, fmt: str, nchunks: int) -> int:
        """The activation planes (36 bytes a chunk) rounded up to 16, then 8 warps x NB x R x granules x 16."""
        acts = q8_1_staging_bytes(1, nchunks)
        return ceil_div(acts, 16) * 16 + WARPS * self.buffers * self.rows * coal_geometry(fmt).granules * 16

    def static_bytes(self, fmt: str) -> int:
        """SharedTab<D>: the table in the decoder's copies and two constants (8 bytes)."""
        dec = Mmvq.new_config(fmt, 1).decoder
        copies = Mmvq.DECODERS[dec].copies if dec else 1
        return (decode_table_bytes(fmt) - 8) * copies + 8


# The candidates (iq3_xxs decodes with masked-split-rep16, iq3_s with masked-rep16: new's one-column decoders),
# around new's winners (iq3_xxs r4m3u4, iq3_s r2m4u2). A lane holds the next step's granules in registers
# (ceil(R x G / 32) uint4 slots), so R = 4 needs MINB 2; U unrolls the loop over step pairs; NB = 2 drops one
# of the two __syncwarp a step. The shapes that spill under NVRTC 13 for a format (compile --resources: R = 4
# at MINB 3 both, iq3_s R = 2 at MINB 4) do not run it; the tests check that none left spills.
COAL_CONFIGS = tuple(CoalConfig(*c) for c in (
    (2, 4, 2, 1, ("iq3_xxs",)), (2, 4, 2, 2, ("iq3_xxs",)), (2, 4, 4, 2, ("iq3_xxs",)),
    (2, 3, 2, 1, FORMATS), (2, 3, 2, 2, FORMATS), (2, 3, 4, 2, FORMATS), (4, 2, 2, 2, FORMATS),
    (4, 2, 4, 2, FORMATS)))


def _kernels(config: CoalConfig):
    def kernels(family, source: str) -> list[str]:
        return [config.kernel(fmt) for fmt in config.formats] if source == OWN_SOURCE else []
    return kernels


def launch_coal_pass(config: CoalConfig, case, kernels, dev, outs, col0: int, stream=None) -> None:
    """One one-column pass (column col0) of mmvq_coal, with mmvq_new's grid: min(row groups, resident blocks)."""
    nchunks = case.cols // 32
    fn = kernels.get(config.kernel(case.fmt))
    shared = config.dynamic_bytes(case.fmt, nchunks)
    allow_dynamic_shared(fn, shared, static_bytes=config.static_bytes(case.fmt))
    groups = ceil_div(case.rows, WARPS * config.rows)
    grid = (min(groups, resident_blocks(fn, 32 * WARPS, shared)),)
    args = (dev["w"], np.int64(row_stride(case.fmt, case.cols)), np.int32(case.rows), np.int32(nchunks),
            dev["xq"][col0:col0 + 1], outs["y"][col0:col0 + 1], np.int32(case.rows))
    fn(grid, (32 * WARPS,), args, shared_mem=shared, stream=stream)


def _launch(config: CoalConfig):
    def launch(family, case, kernels, dev, outs, stream=None) -> None:
        """Quantize, then per column pass: mmvq_coal for a one-column pass of the config's formats, else new's
        pass (as `new` launches it)."""
        family.quantize_activations(case, kernels, dev, stream)
        col0 = 0
        for nc in Mmvq.column_passes(case.ncols):
            if nc == 1 and case.fmt in config.formats:
                launch_coal_pass(config, case, kernels, dev, outs, col0, stream)
            else:
                family.launch_new_pass(case, kernels, dev, outs, col0, nc, Mmvq.new_config(case.fmt, nc), stream)
            col0 += nc
    return launch


COAL_VARIANTS = tuple(
    Variant(c.label, _kernels(c), _launch(c),
            f"one-column {'/'.join(c.formats)} passes: mmvq_coal R={c.rows} MINB={c.min_blocks} U={c.unroll} "
            f"NB={c.buffers}, "
            "the step's 16-byte granules copied coalesced into shared memory, one step ahead; others as new")
    for c in COAL_CONFIGS)

# Parity: tails of every kind at one column (and 11 = 8 + 2 + 1, whose last pass is one column).
# (37, 1280): 40 chunks, a short second step (one block, 7 granules) and a last partial row group;
# (3, 256): fewer rows than one warp's R and one block (8 chunks, lanes 8-31 idle);
# (1000, 14336): 448 chunks (14 steps, both phases), 1000 rows (a partial last group at R = 2 and 4);
# the built-in SHAPES (8192x2560: 80 chunks; 16384x512: 16 chunks), the edge blocks and the fixture.
PARITY_SHAPES = ((37, 1280), (3, 256), (1000, 14336))
PARITY_NCOLS = (1, 11)
BENCH_SHAPES = ((131072, 8192), (4096, 14336))  # PEER.md's DRAM shape and its built-in shape


class MmvqCoal(extend_builtin("mmvq", OWN_SOURCE, KERNELS, COAL_VARIANTS)):
    name = "mmvq_coal"
    description = "mmvq with coalesced weight copies for the one-column iq3 passes (experiments/mmvq_coal)"

    def default_cases(self):
        return self.grid_cases(FORMATS, (*Mmvq.SHAPES, *PARITY_SHAPES), PARITY_NCOLS)

    def bench_cases(self):
        return [self.case(fmt, r, k, 1, "seed:1") for fmt in FORMATS for r, k in BENCH_SHAPES]


assert all(math.gcd(coal_geometry(f).step, 16) == 16 - coal_geometry(f).max_phase for f in FORMATS)
