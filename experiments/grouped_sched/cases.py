"""grouped_sched (issue 28, candidate (c)): the grouped experts through mmvq_new's schedule
(kernels/grouped_sched.cu), as a --cases file: a family `grouped_sched`, the built-in grouped family with one
variant per candidate launch beside old and new, so that parity checks each bitwise against old and bench
times them beside new in one run; nothing built-in changes.

    strata-bench compile --arch 90 --cases experiments/grouped_sched/cases.py --family grouped_sched --resources
    strata-bench parity --cases experiments/grouped_sched/cases.py --family grouped_sched
    strata-bench bench --cases experiments/grouped_sched/cases.py --family grouped_sched

A candidate runs grouped_sched_gateup<F, R, NC, MINB, U, FCVT> (gate and up of R rows each per warp, SwiGLU
into H) and grouped_sched_down<G, R, NC, MINB, U, FCVT> (mmvq.cu's new_step over R rows), each on a grid of
(x, experts) blocks of 8 warps, x = min(row groups, resident blocks / experts): a block loops over its expert's
row groups. Each expert's entries go in windows of NC staged entries and passes of NC, 4, 2, 1 (sched_passes
below mirrors the kernel's loops; tests/test_grouped_sched.py runs that mirror over every case's groups and
checks every output is stored exactly once, from its own entry's activations). Only the public kit is used.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from strata_bench.kit import (Variant, allow_dynamic_shared, builtin_family, ceil_div, constants, decode_table_bytes,
                              extend_builtin, launch_quantize_q8_1, q8_1_staging_bytes, resident_blocks,
                              row_stride, traits)

Grouped = builtin_family("grouped")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "grouped_sched.cu"  # in KERNELS
WARPS = constants.MMVQ_NEW_WARPS  # the kernels' block is mmvq_new's
# Formats (grouped.py's GATE_FORMATS and DOWN_FORMATS; the tests check them against the built-in family's cases)
GATE_FORMATS = ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_m", "iq4_xs", "q2_0")
DOWN_FORMATS = ("iq4_nl", "q2_0", "iq4_xs")
SHARED_OPTIN = 227 * 1024  # sm_90's per-block shared memory limit


class MatrixLaunch(NamedTuple):  # not a dataclass: a --cases file's module is not in sys.modules
    """One matrix's kernel: R rows per warp (of each of gate and up for gate/up), NC entries per staged window
    (the widest pass), MINB blocks per SM (__launch_bounds__), the step loop's unroll U (0: the compiler's),
    FCVT (chunk_isum_f: the same float)."""

    rows: int
    entries: int
    min_blocks: int
    unroll: int
    fcvt: bool = True

    def label(self) -> str:
        return f"r{self.rows}n{self.entries}m{self.min_blocks}u{self.unroll}" + ("f" if self.fcvt else "")

    def kernel(self, kind: str, fmt: str) -> str:
        return (f"grouped_sched_{kind}<{traits(fmt)}, {self.rows}, {self.entries}, {self.min_blocks}, "
                f"{self.unroll}, {'true' if self.fcvt else 'false'}>")

    def dynamic_bytes(self, nchunks: int) -> int:
        """One window of staged activations: NC entries x nchunks q8_1 blocks as StagedActs planes (36 bytes a
        block)."""
        return q8_1_staging_bytes(self.entries, nchunks)

    def row_groups(self, rows: int) -> int:
        return ceil_div(rows, WARPS * self.rows)


class SchedConfig(NamedTuple):
    """A candidate: the gate/up launch and the down launch."""

    gate: MatrixLaunch
    down: MatrixLaunch

    @property
    def label(self) -> str:
        return f"sched-g{self.gate.label()}-d{self.down.label()}"


def _m(*a) -> MatrixLaunch:
    return MatrixLaunch(*a)


# Candidates (no spills for sm_90 under NVRTC 13: compile --resources; the tests check it). Gate/up: R = 1
# decodes 2 rows a step (a gate and an up row), like mmvq's 8-column R = 2, with 2 x 8 accumulators (93-113
# registers); R = 2 (4 rows, 32 accumulators) spills 32-1008 bytes at MINB 2, and unrolling gate/up's loop by 2
# spills 12-16 bytes for iq4_xs, iq3_s, iq2_xs. Down: mmvq's 8-column R = 2 (U = 4 and U = 2 spill for iq4_xs,
# U = 0 does not), and NC = 4 (U = 4), whose window at d_ff = 14336 (64.5 KB) lets 3 blocks share an SM where
# NC = 8's (129 KB) allows one. Both use FCVT (mmvq's 8-column winners do; without it gate/up takes 0-6 fewer
# registers and the same loop instructions less the FCVT fmaf, more I2F/IMAD). Two candidates keep the compile
# (NVRTC, about 25 s) and the bench inside a minute of device time.
SCHED_CONFIGS = (
    SchedConfig(_m(1, 8, 2, 1), _m(2, 8, 2, 0)),
    SchedConfig(_m(1, 8, 2, 1), _m(2, 4, 2, 4)),
)


def sched_grid(launch: MatrixLaunch, rows: int, experts: int, resident: int) -> tuple[int, int]:
    """(x, experts): x = min(row groups, max(1, resident blocks // experts)), so one wave of blocks covers every
    expert and a block loops over the rest of its expert's row groups (mmvq_new's persistent grid)."""
    return (min(launch.row_groups(rows), max(1, resident // experts)), experts)


def window_passes(nc: int, wn: int) -> list[tuple[int, int]]:
    """(W, koff) of the passes of a window of wn <= nc entries: nc if wn == nc, else the binary digits of wn
    from the largest (grouped_sched.cu's window_passes)."""
    if wn == nc:
        return [(nc, 0)]
    out, koff = [], 0
    for w in (4, 2, 1):
        if w < nc and wn & w:
            out.append((w, koff))
            koff += w
    return out


def sched_passes(launch: MatrixLaunch, rows: int, groups: tuple[int, ...], grid_x: int):
    """The kernel's loops (expert_row_groups, window_passes, the pass's stores) for every block, yielding
    (expert, block x, row group, wfirst, wn, W, koff, row_lo, row_hi): the staged window holds entries wfirst ..
    wfirst + wn - 1 (wn x nchunks blocks), the pass reads column col of entry wfirst + koff + col at plane index
    (koff + col) * nchunks + c, and its 8 warps store rows row_lo .. row_hi - 1 (those below `rows`) of
    entries wfirst + koff .. wfirst + koff + W - 1."""
    offsets = np.concatenate([[0], np.cumsum(groups)]).astype(int)
    ngroups = launch.row_groups(rows)
    span = WARPS * launch.rows  # rows of a row group: warp w has rows (grp * WARPS + w) * R .. + R - 1
    for e in range(len(groups)):
        begin, end = int(offsets[e]), int(offsets[e + 1])
        if end <= begin:
            continue
        for bx in range(grid_x):
            for grp in range(bx, ngroups, grid_x):
                for wfirst in range(begin, end, launch.entries):
                    wn = min(launch.entries, end - wfirst)
                    for w, koff in window_passes(launch.entries, wn):
                        yield e, bx, grp, wfirst, wn, w, koff, grp * span, min(rows, (grp + 1) * span)


def groups_of(case) -> tuple[int, ...]:
    """Entries per expert (the case's `groups` param, "5-0-1-..."; the built-in family checks it)."""
    return tuple(int(g) for g in case.param("groups").split("-"))


def _kernels(config: SchedConfig):
    def kernels(family, source: str) -> list[str]:
        if source != OWN_SOURCE:
            return []
        return ([config.gate.kernel("gateup", f) for f in GATE_FORMATS]
                + [config.down.kernel("down", f) for f in DOWN_FORMATS])
    return kernels


def _matrix(launch: MatrixLaunch, kind: str, fmt: str, rows: int, k: int, experts: int, kernels, dev,
            weights: tuple, act, out, stream) -> None:
    fn = kernels.get(launch.kernel(kind, fmt))
    nchunks = k // 32
    shared = launch.dynamic_bytes(nchunks)
    allow_dynamic_shared(fn, shared, static_bytes=decode_table_bytes(fmt))
    grid = sched_grid(launch, rows, experts, resident_blocks(fn, 32 * WARPS, shared))
    stride = row_stride(fmt, k)
    args = (*weights, np.int64(stride), np.int64(stride * rows), np.int32(rows), np.int32(nchunks), dev["offsets"],
            act, out)
    fn(grid, (32 * WARPS,), args, shared_mem=shared, stream=stream)


def _launch(config: SchedConfig):
    def launch(family, case, kernels, dev, outs, stream=None) -> None:
        """x -> q8_1 -> H (gate/up with SwiGLU) -> q8_1 -> Y (down), as the built-in variants, the two matrices
        through grouped_sched's kernels."""
        experts = len(groups_of(case))
        d_ff, d_model, down = case.rows, case.cols, case.param("down")
        launch_quantize_q8_1(kernels, dev["x"], dev["xq"], case.ncols * d_model // 32, stream)
        _matrix(config.gate, "gateup", case.fmt, d_ff, d_model, experts, kernels, dev, (dev["gate"], dev["up"]),
                dev["xq"], outs["H"], stream)
        launch_quantize_q8_1(kernels, outs["H"], dev["hq"], case.ncols * d_ff // 32, stream)
        _matrix(config.down, "down", down, d_model, d_ff, experts, kernels, dev, (dev["down"],), dev["hq"],
                outs["Y"], stream)
    return launch


SCHED_VARIANTS = tuple(
    Variant(c.label, _kernels(c), _launch(c),
            f"mmvq_new's schedule per expert: gate/up R={c.gate.rows} NC={c.gate.entries}, down R={c.down.rows} "
            f"NC={c.down.entries}; each chunk decoded once per pass of up to NC entries")
    for c in SCHED_CONFIGS)

# Parity: the built-in defaults (every gate x down pair, groups 5-0-1-8-3-6-2-7-3 at 512 x 1024: passes of 8,
# 4, 2 and 1 and an empty expert, one window each) and, for a subset, groups with several windows
# (11 = 8 + 2 + 1, 17 = 8 + 8 + 1, 9 = 8 + 1) at d_ff = 768, d_model = 1280: 40 chunks a gate row (lanes 8-31 a
# step fewer) and 24 a down row (lanes 24-31 idle).
WINDOW_GROUPS = (11, 0, 1, 17, 3, 9)
WINDOW_SHAPE = (768, 1280)  # (d_ff, d_model)
WINDOW_PAIRS = (("iq2_xxs", "iq4_nl"), ("iq3_s", "iq4_xs"), ("iq4_xs", "q2_0"), ("q2_0", "q2_0"), ("iq1_m", "iq4_nl"))


class GroupedSched(extend_builtin("grouped", OWN_SOURCE, KERNELS, SCHED_VARIANTS)):
    name = "grouped_sched"
    description = "grouped experts through mmvq_new's schedule per expert (experiments/grouped_sched)"

    def default_cases(self):
        cases = list(Grouped.default_cases(self))
        d_ff, d_model = WINDOW_SHAPE
        cases += [self.case(g, d_ff, d_model, sum(WINDOW_GROUPS), "seed:1", down=d,
                            groups="-".join(str(n) for n in WINDOW_GROUPS)) for g, d in WINDOW_PAIRS]
        return cases
