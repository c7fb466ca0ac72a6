"""The tensor-core passes of mmvq's `new`: an 8-column pass of a format listed in MMA_CONFIGS runs mmvq_mma
(kernels_src/mmvq/mmvq_mma.cu: 16-row x 8-column tiles, the chunk integers from mma.sync m16n8k32, the same
bits as mmvq_old by the contract in its header) on shapes with at least `min_rows` rows; every other pass runs
mmvq_new's kernel. Below min_rows too few 16-row tiles are left for the tile groups a GPU holds (4096 rows:
256 tiles for 528 tile groups on an H200), and mmvq_new is faster; min_rows is the smallest row count where
mmvq_mma was measured faster (docs/PERF_NOTES.md, v6 and v7).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from strata_bench.kit import (allow_dynamic_shared, ceil_div, decode_table_bytes, q8_1_staging_bytes, resident_blocks,
                              row_stride, traits)

MMA_SOURCE = "mmvq/mmvq_mma.cu"
MMA_WIDTH = 8  # columns of a pass: the mma's N
MMA_WARPS = 4  # per tile group: one 16-row tile, 8 virtual lanes per warp
MMA_ROWS = 16  # rows per tile: the mma's M
TREE_BYTES = 3 * 32 * 32 * 4  # per tile group: tile_tree's three buffers of 32 floats x 32 lanes
MMA_MAJOR = 8  # mma.sync m16n8k32 of int8 needs sm_80; an older GPU runs mmvq_new (the kernel compiles to a trap)


def group_row_bytes(fmt: str) -> int:
    """Shared bytes per row of a warp's group buffer, as MmaGroup<F>::ROW (mmvq_mma.cu): the 16-byte
    granules that cover a row's 8 chunks at any head (a multiple of gcd(bytes, 16)), an odd number of them
    (so that the 16 rows' reads spread over the banks)."""
    from math import gcd

    from strata_bench.formats import get_format

    f = get_format(fmt)
    nbytes = 8 * 32 * f.type_size // f.block_size
    granules = ceil_div(16 - gcd(nbytes, 16) + nbytes, 16)
    return 16 * (granules | 1)


@dataclass(frozen=True)
class MmaConfig:
    """How one format's 8-column passes run mmvq_mma<F, TG, MINB, S>: `tile_groups` TG per block (4 warps
    each; as many as fit 65536 registers without spills), weight `stages` S (1: the next group in registers,
    measured fastest and the only one kernels_src has; experiments/mmvq_mma adds the cp.async stages S >= 2),
    MINB, the smallest row count it runs at (`min_rows`), and the fragment decoder `frag`: "" the format's own
    MmaFrag, else the format tag's suffix of another (mma_frag.cuh: "pair", the lane-pair decode, fmt_iq1_s_pair
    and fmt_iq2_xxs_pair; mma_frag_split.cuh: "k16pair", the lane pair of a format with a scale per 16 values, two
    m16n8k16 mmas a chunk). None of them touches the arithmetic: every MmaFrag gives the same words (mma_frag.cuh)."""

    tile_groups: int
    min_rows: int
    min_blocks: int = 1
    stages: int = 1
    frag: str = ""

    def kernel(self, fmt: str) -> str:
        tag = f"{traits(fmt)}_{self.frag}" if self.frag else traits(fmt)
        return f"mmvq_mma<{tag}, {self.tile_groups}, {self.min_blocks}, {self.stages}>"

    @property
    def threads(self) -> int:
        return 32 * MMA_WARPS * self.tile_groups

    def shared_bytes(self, fmt: str, nchunks: int) -> tuple[int, int]:
        """(dynamic, static) shared memory: the 8 columns' activations (36 bytes per block), each warp's S
        buffers of a 16-row group (group_row_bytes a row) and each tile group's tree operands; the table."""
        group = MMA_ROWS * group_row_bytes(fmt)
        warps = MMA_WARPS * self.tile_groups
        dynamic = q8_1_staging_bytes(MMA_WIDTH, nchunks) + warps * self.stages * group + self.tile_groups * TREE_BYTES
        return dynamic, decode_table_bytes(fmt)

    def applies(self, fmt: str, rows: int, nchunks: int, major: Callable[[], int],
                shared_optin: Callable[[], int]) -> bool:
        """Whether a pass of `rows` runs here on a device of compute capability major().x whose blocks may
        opt in to shared_optin() bytes of shared memory (asked only where the rows and the capability admit
        the pass: the sm_90 and sm_80 limits differ)."""
        if rows < self.min_rows or major() < MMA_MAJOR:
            return False
        return sum(self.shared_bytes(fmt, nchunks)) <= shared_optin()


# Measured on the H200 (cold, 8 columns, us; PERF_NOTES v7): iq4_nl 131072x8192 229.6 against mmvq_new's
# 324.2, 32768x8192 65.8 against 88.8, 4096x14336 36.8 against 25.7; q8_0 131072x8192 287.9 against 296.8,
# 32768x8192 88.3 against 82.3; iq4_xs 131072x8192 268.7 against 297.9, 32768x8192 75.0 against 82.6.
# iq2_xxs and iq1_s have per-lane fragment decoders too (experiments/mmvq_mma) but were slower than mmvq_new.
# iq1_s with the lane-pair decode (experiments/mmvq_lanepair, issue 37; PERF_NOTES v10): 131072x8192 235.1
# against mmvq_new's 284.3, bitwise equal; measured at that shape only, hence min_rows 131072. iq2_xxs with the
# same decoder (PERF_NOTES v10, v11): 131072x8192 268.5 against 304.3, bitwise equal; at that shape only too.
# iq1_m, iq2_xs and iq2_s with the split lane pair (two m16n8k16 mmas a chunk, mma_frag_split.cuh's
# fmt_<format>_k16pair), iq3_xxs and iq3_s with their per-lane MmaFrag (experiments/mmvq_mma5; PERF_NOTES v14):
# measured on an H100 80GB HBM3 (2026-12-06, cold, 8 columns, us, against mmvq_new in the same run; bitwise equal
# to old in the experiment's 70 parity cases) at 131072x8192 / 32768x8192: iq1_m 273.55 against 318.91 / 77.37
# against 91.36, iq2_xs 276.13 against 325.56 / 78.61 against 90.10, iq2_s 310.83 against 329.64 / 87.23 against
# 90.87, iq3_xxs 323.64 against 353.24 / 89.53 against 97.00, iq3_s 333.18 against 379.24 / 91.40 against 105.39;
# faster at both shapes, hence min_rows 32768, the smaller one.
MMA_CONFIGS: dict[str, MmaConfig] = {
    "iq4_nl": MmaConfig(tile_groups=4, min_rows=32768),
    "iq4_xs": MmaConfig(tile_groups=4, min_rows=32768),
    "q8_0": MmaConfig(tile_groups=3, min_rows=131072),
    "iq1_s": MmaConfig(tile_groups=4, min_rows=131072, frag="pair"),
    "iq2_xxs": MmaConfig(tile_groups=4, min_rows=131072, frag="pair"),
    "iq1_m": MmaConfig(tile_groups=4, min_rows=32768, frag="k16pair"),
    "iq2_xs": MmaConfig(tile_groups=4, min_rows=32768, frag="k16pair"),
    "iq2_s": MmaConfig(tile_groups=4, min_rows=32768, frag="k16pair"),
    "iq3_xxs": MmaConfig(tile_groups=4, min_rows=32768),
    "iq3_s": MmaConfig(tile_groups=4, min_rows=32768),
}


def mma_config(fmt: str, nc: int, rows: int, nchunks: int, major: Callable[[], int],
               shared_optin: Callable[[], int]) -> MmaConfig | None:
    """The tensor-core launch of a pass of nc columns on a device of compute capability major().x whose
    blocks may opt in to shared_optin() bytes of shared memory (kit.compute_major, kit.shared_optin), or
    None where mmvq_new's kernel runs it. The device is asked only for a listed format's tall 8-column
    pass: this runs on the host before every pass, and a workload of small kernels is bound by such host
    time."""
    config = MMA_CONFIGS.get(fmt)
    if nc != MMA_WIDTH or config is None or not config.applies(fmt, rows, nchunks, major, shared_optin):
        return None
    return config


def mma_kernels(source: str) -> list[str]:
    return [config.kernel(fmt) for fmt, config in MMA_CONFIGS.items()] if source == MMA_SOURCE else []


def launch_mma_pass(config: MmaConfig, fmt: str, rows: int, cols: int, kernels: Any, dev: Mapping[str, Any],
                    outs: Mapping[str, Any], col0: int, stream: Any) -> None:
    """mmvq_mma over columns col0 .. col0 + 8: a persistent grid of at most the resident blocks."""
    nchunks = cols // 32
    fn = kernels.get(config.kernel(fmt))
    dynamic, static = config.shared_bytes(fmt, nchunks)
    allow_dynamic_shared(fn, dynamic, static_bytes=static)
    blocks = ceil_div(ceil_div(rows, MMA_ROWS), config.tile_groups)
    grid = (min(blocks, resident_blocks(fn, config.threads, dynamic)),)
    args = (dev["w"], np.int64(row_stride(fmt, cols)), np.int32(rows), np.int32(nchunks),
            dev["xq"][col0:col0 + MMA_WIDTH], outs["y"][col0:col0 + MMA_WIDTH], np.int32(rows))
    fn(grid, (config.threads,), args, shared_mem=dynamic, stream=stream)
