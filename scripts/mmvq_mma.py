"""mmvq_mma (kernels_src/mmvq/mmvq_mma.cu, a prototype: tensor-core mma for the chunk integers), as a
--cases file: a family `mmvq_mma` with the variants old, new and mma, so that parity checks mma bitwise
against old and bench times the three in one run; nothing built-in changes.

    strata-bench parity --cases scripts/mmvq_mma.py --family mmvq_mma
    strata-bench bench --cases scripts/mmvq_mma.py --family mmvq_mma

The mma variant runs mmvq_mma for the 8-column passes of iq4_nl and q8_0 whose activations fit in shared
memory (MMA_PASS.applies); every other pass (other formats, the 4-, 2- and 1-column passes of 11 columns,
a K too long) runs the family's new kernel as `new` does, so the variant runs every case of the family.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from strata_bench.cases.family import Variant
from strata_bench.families.mmvq import EDGE_SHAPE, SHAPES, Mmvq, column_passes, fixture_name, new_config
from strata_bench.kit import (allow_dynamic_shared, ceil_div, decode_table_bytes, fixture_ref, q8_1_staging_bytes,
                              resident_blocks, row_stride, traits)

MMA_SOURCE = "mmvq/mmvq_mma.cu"
MMA_WARPS = 4  # per tile group: one 16-row tile, 8 virtual lanes per warp (mmvq_mma.cu)
MMA_ROWS = 16  # rows per tile: the mma's M
MAX_SHARED_OPTIN = 227 * 1024  # per-block shared memory opt-in of sm_90 (H100, H200); an A100 allows 163 KiB


class MmaPass(NamedTuple):  # not a dataclass: a --cases file's module is not in sys.modules, which dataclass needs
    """Which passes mmvq_mma runs, and its launch: `formats` (one scale and one chunk per block, with an
    MmaFrag in mma_frag.cuh), `width` columns (the mma's N), per format the tile groups per block TG
    (`groups`: 4 warps each; as many as the registers allow without spills under ptxas -v: 4 x 128
    threads leave 128 registers, which iq4_nl fits and q8_0, at about 150, does not) and MINB."""

    formats: tuple[str, ...] = ("iq4_nl", "q8_0")
    width: int = 8
    groups: tuple[tuple[str, int], ...] = (("iq4_nl", 4), ("q8_0", 3))
    min_blocks: int = 1

    def tile_groups(self, fmt: str) -> int:
        return dict(self.groups)[fmt]

    def kernel(self, fmt: str) -> str:
        return f"mmvq_mma<{traits(fmt)}, {self.tile_groups(fmt)}, {self.min_blocks}>"

    def threads(self, fmt: str) -> int:
        return 32 * MMA_WARPS * self.tile_groups(fmt)

    def shared_bytes(self, fmt: str, nchunks: int) -> tuple[int, int]:
        """(dynamic, static) shared memory: the 8 columns' activations (36 bytes per block, as new's
        staging), each warp's 16-row x 8-block group, each tile group's tile_tree floats (3 x 32 x 32);
        the table."""
        from strata_bench.formats import get_format

        tg = self.tile_groups(fmt)
        group = MMA_WARPS * tg * MMA_ROWS * 8 * get_format(fmt).type_size
        return q8_1_staging_bytes(self.width, nchunks) + group + tg * 3 * 32 * 32 * 4, decode_table_bytes(fmt)

    def applies(self, fmt: str, nc: int, nchunks: int) -> bool:
        if fmt not in self.formats or nc != self.width:
            return False
        return sum(self.shared_bytes(fmt, nchunks)) <= MAX_SHARED_OPTIN


MMA_PASS = MmaPass()


def _mma_kernels(family, source: str) -> list[str]:
    return [MMA_PASS.kernel(fmt) for fmt in MMA_PASS.formats] if source == MMA_SOURCE else []


def _launch_mma_pass(case, kernels, dev, outs, col0: int, stream) -> None:
    nchunks = case.cols // 32
    fn = kernels.get(MMA_PASS.kernel(case.fmt))
    dynamic, static = MMA_PASS.shared_bytes(case.fmt, nchunks)
    allow_dynamic_shared(fn, dynamic, static_bytes=static)
    threads = MMA_PASS.threads(case.fmt)
    blocks = ceil_div(ceil_div(case.rows, MMA_ROWS), MMA_PASS.tile_groups(case.fmt))
    grid = (min(blocks, resident_blocks(fn, threads, dynamic)),)
    args = (dev["w"], np.int64(row_stride(case.fmt, case.cols)), np.int32(case.rows), np.int32(nchunks),
            dev["xq"][col0:col0 + MMA_PASS.width], outs["y"][col0:col0 + MMA_PASS.width], np.int32(case.rows))
    fn(grid, (threads,), args, shared_mem=dynamic, stream=stream)


def _launch_mma(family, case, kernels, dev, outs, stream=None) -> None:
    """Quantize, then per column pass mmvq_mma where MMA_PASS applies, else new's kernel for the pass."""
    family._quantize_activations(case, kernels, dev, stream)
    col0 = 0
    for nc in column_passes(case.ncols):
        if MMA_PASS.applies(case.fmt, nc, case.cols // 32):
            _launch_mma_pass(case, kernels, dev, outs, col0, stream)
        else:
            family._launch_new_pass(case, kernels, dev, outs, col0, nc, new_config(case.fmt, nc), stream)
        col0 += nc


MMA_VARIANT = Variant("mma", _mma_kernels, _launch_mma,
                      "8-column passes of iq4_nl / q8_0: 16-row x 8-column tiles, chunk integers from an "
                      "m16n8k32 s8 mma (mmvq_mma.cu); other passes as new")

PARITY_NCOLS = (8, 11)  # one 8-column pass; 8 + 2 + 1 (the mma pass beside new's)


class MmvqMma(Mmvq):
    name = "mmvq_mma"
    sources = (*Mmvq.sources, MMA_SOURCE)
    description = "mmvq with mmvq_mma (tensor-core chunk integers) for 8-column passes (scripts/mmvq_mma.py)"
    variants = (*Mmvq.variants, MMA_VARIANT)

    def default_cases(self):
        cases = []
        for fmt in MMA_PASS.formats:
            for rows, cols in (*SHAPES, (1000, 1536), (24, 544)):  # + a part tile, 48 and 17 chunks
                cases += [self.case(fmt, rows, cols, n, "seed:1") for n in PARITY_NCOLS]
            cases += [self.case(fmt, *EDGE_SHAPE, n, "edge:2") for n in PARITY_NCOLS]
            shipped = fixture_ref(fixture_name(fmt))
            if shipped is not None:
                cases += self.fixture_cases(shipped, PARITY_NCOLS, fmt=fmt)
        return cases

    def bench_cases(self):
        shapes = ((131072, 8192), (4096, 14336))  # PEER.md's DRAM shape and its built-in shape
        return [self.case(fmt, r, k, 8, "seed:1") for fmt in MMA_PASS.formats for r, k in shapes]
