"""mmvq_mma_dec (kernels_src/mmvq/mmvq_mma_dec.cu: tensor-core chunk integers for every format, each format's
own decode feeding the mma through a shared tile), as a --cases file: a family `mmvq_mma_dec` with the
variants old, new, mmad and mmad2 (mmad with the next group prefetched into L2), so that parity checks both
bitwise against old and bench times the four in one run; nothing built-in changes.

    strata-bench compile --arch 90 --cases scripts/mmvq_mma_dec.py --family mmvq_mma_dec --resources
    strata-bench parity --cases scripts/mmvq_mma_dec.py --family mmvq_mma_dec
    strata-bench bench --cases scripts/mmvq_mma_dec.py --family mmvq_mma_dec

The mmad variants run mmvq_mma_dec for every 8-column pass whose shared memory fits (MmaDecPass.launch_groups
picks the tile groups per block); every other pass (the 4-, 2- and 1-column passes of 11 columns, a K too
long) runs the family's new kernel as `new` does, so the variant runs every case of the family.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from strata_bench.cases.family import Variant
from strata_bench.families.mmvq import (FORMATS, SHAPES, Mmvq, column_passes, new_config)
from strata_bench.kit import (allow_dynamic_shared, ceil_div, decode_table_bytes, q8_1_staging_bytes,
                              resident_blocks, row_stride, traits)

DEC_SOURCE = "mmvq/mmvq_mma_dec.cu"
DEC_WARPS = 4  # per tile group: one 16-row tile, 8 virtual lanes per warp (mmvq_mma_dec.cu)
DEC_ROWS = 16  # rows per tile: the mma's M
DEC_TILE_BYTES = 8 * (16 * 48 + 16)  # MmaDecTile::BYTES (mma_dec_tile.cuh): one warp's 8 chunks x 16 rows
TREE_BYTES = 3 * 32 * 32 * 4  # tile_tree's operands per tile group (mma_common.cuh)
MAX_SHARED_OPTIN = 227 * 1024  # per-block shared memory opt-in of sm_90 (H100, H200)


class MmaDecPass(NamedTuple):  # not a dataclass: a --cases file's module is not in sys.modules, which dataclass needs
    """Which passes mmvq_mma_dec runs and its launch: `width` columns (the mma's N); `groups`, the tile groups
    per block TG (4 warps each) it is compiled for, most preferred first: a launch takes the first whose
    shared memory fits. Registers are not the limit (ptxas -v, sm_90, TG = 4: 95-110 of the 128 that 512
    threads leave, no spills, every format); shared memory is: at K = 8192 TG = 4 takes 218 KiB (16 warps,
    one block per SM), and at K = 14336 only TG = 2 fits. MINB = 1: one block fills the SM's shared memory.
    `prefetch` (the kernel's PF): 1 asks L2 for the warp's next group before decoding the current one (the
    decode's loads are waited on before the mma, and 16 warps per SM leave only ~1-2 KB each in flight)."""

    formats: tuple[str, ...] = FORMATS
    width: int = 8
    groups: tuple[int, ...] = (4, 2)
    min_blocks: int = 1
    prefetch: int = 0

    def kernel(self, fmt: str, tg: int) -> str:
        return f"mmvq_mma_dec<{traits(fmt)}, {tg}, {self.min_blocks}, {self.prefetch}>"

    def kernels(self) -> list[str]:
        return [self.kernel(fmt, tg) for fmt in self.formats for tg in self.groups]

    def shared_bytes(self, fmt: str, nchunks: int, tg: int) -> tuple[int, int]:
        """(dynamic, static) shared memory: the 8 columns' activations (36 bytes per block), each warp's
        MmaDecTile, each tile group's tile_tree operands; the decode table."""
        dynamic = q8_1_staging_bytes(self.width, nchunks) + DEC_WARPS * tg * DEC_TILE_BYTES + tg * TREE_BYTES
        return dynamic, decode_table_bytes(fmt)

    def launch_groups(self, fmt: str, nc: int, nchunks: int) -> int | None:
        """The TG a pass of nc columns runs with, or None where mmvq_mma_dec does not run it."""
        if fmt not in self.formats or nc != self.width:
            return None
        return next((tg for tg in self.groups if sum(self.shared_bytes(fmt, nchunks, tg)) <= MAX_SHARED_OPTIN), None)


MMA_DEC_PASSES = {"mmad": MmaDecPass(), "mmad2": MmaDecPass(prefetch=1)}  # variant name -> its launch


def _dec_kernels(passes: tuple[MmaDecPass, ...], family, source: str) -> list[str]:
    return [k for p in passes for k in p.kernels()] if source == DEC_SOURCE else []


def _launch_dec_pass(p: MmaDecPass, case, kernels, dev, outs, col0: int, tg: int, stream) -> None:
    nchunks = case.cols // 32
    fn = kernels.get(p.kernel(case.fmt, tg))
    dynamic, static = p.shared_bytes(case.fmt, nchunks, tg)
    allow_dynamic_shared(fn, dynamic, static_bytes=static)
    threads = 32 * DEC_WARPS * tg
    blocks = ceil_div(ceil_div(case.rows, DEC_ROWS), tg)
    grid = (min(blocks, resident_blocks(fn, threads, dynamic)),)
    args = (dev["w"], np.int64(row_stride(case.fmt, case.cols)), np.int32(case.rows), np.int32(nchunks),
            dev["xq"][col0:col0 + p.width], outs["y"][col0:col0 + p.width], np.int32(case.rows))
    fn(grid, (threads,), args, shared_mem=dynamic, stream=stream)


def _launch_dec(p: MmaDecPass, family, case, kernels, dev, outs, stream=None) -> None:
    """Quantize, then per column pass mmvq_mma_dec where pass p runs it, else new's kernel for the pass."""
    family._quantize_activations(case, kernels, dev, stream)
    col0 = 0
    for nc in column_passes(case.ncols):
        tg = p.launch_groups(case.fmt, nc, case.cols // 32)
        if tg is not None:
            _launch_dec_pass(p, case, kernels, dev, outs, col0, tg, stream)
        else:
            family._launch_new_pass(case, kernels, dev, outs, col0, nc, new_config(case.fmt, nc), stream)
        col0 += nc


DEC_DESCRIPTIONS = {
    "mmad": "8-column passes of every format: 16-row x 8-column tiles, the format's decode through a shared tile "
            "into m16n8k32 (or two m16n8k16) s8 mma (mmvq_mma_dec.cu); other passes as new",
    "mmad2": "mmad with the warp's next group prefetched into L2",
}
# Each variant lists its own pass's kernels; the family compiles the union (Family.name_expressions).
DEC_VARIANTS = tuple(Variant(name, functools.partial(_dec_kernels, (p,)), functools.partial(_launch_dec, p),
                             DEC_DESCRIPTIONS[name]) for name, p in MMA_DEC_PASSES.items())
MMA_DEC_PASS = MMA_DEC_PASSES["mmad"]

PARITY_NCOLS = (8, 11)  # one 8-column pass; 8 + 2 + 1 (the mma pass beside new's)
# a part tile (1000 = 62.5 tiles) at 48 chunks; 17 chunks; K = 14336, where only TG = 2 fits
PART_SHAPES = ((1000, 1536), (24, 544), (48, 14336))


def whole_blocks(fmt: str, cols: int) -> int:
    """cols rounded up to the format's blocks: 544 (17 chunks) -> 576 for q2_0, 768 for the 256-value
    formats (still a partial last 32-chunk sweep: warp 3 has no chunk)."""
    from strata_bench.formats import get_format

    return ceil_div(cols, get_format(fmt).block_size) * get_format(fmt).block_size


class MmvqMmaDec(Mmvq):
    name = "mmvq_mma_dec"
    sources = (*Mmvq.sources, DEC_SOURCE)
    description = "mmvq with mmvq_mma_dec (tensor-core chunk integers, every format) for 8-column passes " \
                  "(scripts/mmvq_mma_dec.py)"
    variants = (*Mmvq.variants, *DEC_VARIANTS)

    def default_cases(self):
        cases = []
        for fmt in MMA_DEC_PASS.formats:
            for rows, cols in (*SHAPES, *PART_SHAPES):
                cases += [self.case(fmt, rows, whole_blocks(fmt, cols), n, "seed:1") for n in PARITY_NCOLS]
            cases += self.edge_and_fixture_cases(fmt, PARITY_NCOLS, PARITY_NCOLS)
        return cases

    def bench_cases(self):
        return [self.case(fmt, 131072, 8192, 8, "seed:1") for fmt in MMA_DEC_PASS.formats]  # PEER.md's DRAM shape
