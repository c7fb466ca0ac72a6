"""grouped's `new` launches (kernels_src/grouped/grouped.cu, `grouped_{gateup,down}_new`): each expert's entries
as the columns of mmvq_new passes (promoted from experiments/grouped_sched, issue 28 candidate (c)).

A matrix's kernel is a MatrixLaunch: R rows a warp (of each of gate and up for gate/up), NC entries a staged
window (the widest pass), MINB blocks an SM (__launch_bounds__), the step loop's unroll U (0: the compiler's) and
FCVT (chunk_isum_f: the same float). Gate/up runs GATEUP_LAUNCH always; down runs the first row of DOWN_LAUNCHES
whose bound holds the largest expert group. The grid is (x, experts) of 8-warp blocks, x = min(row groups,
resident blocks / experts): a block loops over its expert's row groups (mmvq_new's persistent grid).
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import numpy as np

from strata_bench.kit import (allow_dynamic_shared, ceil_div, constants, decode_table_bytes, q8_1_staging_bytes,
                              resident_blocks, row_stride, traits)

WARPS = constants.MMVQ_NEW_WARPS  # new's block is mmvq_new's


class MatrixLaunch(NamedTuple):
    """One matrix's kernel of `new` (see the module's doc)."""

    rows: int
    entries: int
    min_blocks: int
    unroll: int
    fcvt: bool = True

    def kernel(self, kind: str, fmt: str) -> str:
        """The name expression of `grouped_{kind}_new` for format `fmt`."""
        return (f"grouped_{kind}_new<{traits(fmt)}, {self.rows}, {self.entries}, {self.min_blocks}, "
                f"{self.unroll}, {'true' if self.fcvt else 'false'}>")

    def dynamic_bytes(self, nchunks: int) -> int:
        """One window of staged activations: NC entries x nchunks q8_1 blocks as StagedActs planes."""
        return q8_1_staging_bytes(self.entries, nchunks)

    def row_groups(self, rows: int) -> int:
        return ceil_div(rows, WARPS * self.rows)


# Gate/up: R 1 (a gate and an up row decoded a step, 2 x 8 accumulators, 93-113 registers: 16 warps an SM),
# 8 entries a pass, unrolled by 1. R 2 spills 32-1008 bytes at MINB 2; an unroll of 2 spills for iq4_xs, iq3_s,
# iq2_xs (NVRTC 13, sm_90).
GATEUP_LAUNCH = MatrixLaunch(1, 8, 2, 1)

# Down, by the largest expert group: (most entries an expert, launch), the first row that holds it runs.
# NC 8 stages 8 entries (129 KB at d_ff 14336: one block an SM) and decodes a row once per 8 entries; NC 4
# (U 4; 64.5 KB: 16 warps an SM) decodes it twice. H100 80GB HBM3, 2026-12-06, 14336x4096, 8 experts, cold, us
# per FFN (gate/up + down, with NC 8 / NC 4 down): 8 entries an expert iq2_xxs/iq4_nl 560.92 / 584.72,
# iq3_s/iq4_xs 602.77 / 608.69, iq4_xs/iq4_xs 557.97 / 562.10, q2_0/q2_0 518.29 / 499.26 (q2_0: NC 4 3.7%
# faster, the one pair where NC 8 loses at 8 entries); 32 entries 2638.27 / 2527.41, 2778.24 / 2652.94,
# 2533.57 / 2401.31, 2397.09 / 2196.29 (NC 4 ahead for every pair). Today's former new: 1466-1582 (8) and
# 5937-6243 (32).
DOWN_LAUNCHES: tuple[tuple[int | None, MatrixLaunch], ...] = (
    (8, MatrixLaunch(2, 8, 2, 0)),
    (None, MatrixLaunch(2, 4, 2, 4)),  # None: any group
)


def down_launch(groups: tuple[int, ...]) -> MatrixLaunch:
    """The down kernel for these entries per expert: DOWN_LAUNCHES' first row whose bound holds the largest."""
    largest = max(groups, default=0)
    return next(launch for most, launch in DOWN_LAUNCHES if most is None or largest <= most)


def new_launches() -> tuple[tuple[str, MatrixLaunch], ...]:
    """Every (kind, launch) `new` may run: the kernels it compiles."""
    return (("gateup", GATEUP_LAUNCH), *(("down", launch) for _, launch in DOWN_LAUNCHES))


def new_grid(launch: MatrixLaunch, rows: int, experts: int, resident: int) -> tuple[int, int]:
    """(x, experts): x = min(row groups, max(1, resident blocks // experts)), so one wave of blocks covers every
    expert and a block loops over the rest of its expert's row groups."""
    return (min(launch.row_groups(rows), max(1, resident // experts)), experts)


def launch_matrix(launch: MatrixLaunch, kernels: Any, kind: str, fmt: str, rows: int, k: int, experts: int,
                  dev: Mapping[str, Any], weights: tuple[Any, ...], act: Any, out: Any, stream: Any) -> None:
    """One matrix of `new`: `launch`'s kernel for `fmt` over every expert (rows x k each)."""
    fn = kernels.get(launch.kernel(kind, fmt))
    nchunks = k // 32
    shared = launch.dynamic_bytes(nchunks)
    # The kernels stage mmvq's decode table (static) and one window of q8_1 activations (dynamic).
    allow_dynamic_shared(fn, shared, static_bytes=decode_table_bytes(fmt))
    grid = new_grid(launch, rows, experts, resident_blocks(fn, 32 * WARPS, shared))
    fn(grid, (32 * WARPS,), matrix_args(fmt, rows, k, dev, weights, act, out), shared_mem=shared, stream=stream)


def matrix_args(fmt: str, rows: int, k: int, dev: Mapping[str, Any], weights: tuple[Any, ...], act: Any,
                out: Any) -> tuple[Any, ...]:
    """The arguments of every grouped kernel (old and new): weights, row and expert strides, rows, chunks a row,
    offsets, activations, output."""
    stride = row_stride(fmt, k)
    return (*weights, np.int64(stride), np.int64(stride * rows), np.int32(rows), np.int32(k // 32),
            dev["offsets"], act, out)
