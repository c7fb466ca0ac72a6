"""grouped's `new` (strata_bench/families/grouped_new.py, kernels_src/grouped/grouped.cu's grouped_{gateup,down}_new):
the launch table and the kernels it names, a launch recorded through stub kernels, and the schedule.

The grouped family has no CPU emulation of the arithmetic (each (row, entry) chain is mmvq's code, checked in
tests/families/test_grouped.py through tests/iq_host), so the schedule is mirrored here instead: `schedule` runs the
kernel's loops (expert_row_groups, window_passes, the lanes' chunk loop of gateup_pass and down_pass) and records
which (entry, row) each pass stores, which entries' activations it reads from the staged window, and which chunks
the lanes take. The correct mirror stores every H and Y element exactly once from its own entry's activations
with every chunk taken once, on every default and bench case at three grid widths. A defect planted in one tail
or window path (the mirror of a mutation of tests/test_tail_mutations.py) must break exactly the default cases
listed in EXPOSED_BY, which are those that reach the path: drop a case from the defaults and the test fails."""
from __future__ import annotations

import re
from typing import Iterator, NamedTuple

import numpy as np
import pytest

from strata_bench.families import grouped_new as gn
from strata_bench.families import load_builtin_families
from strata_bench.families import grouped as mod
from strata_bench.families.mmvq import column_passes
from strata_bench.kit import q8_1_staging_bytes, row_stride, traits
from tests.stub_kernels import RecordingKernels, stub_launch_helpers

FAMILY = load_builtin_families()["grouped"]
DEFECTS = ("pass4", "pass2", "pass1", "last_window", "restage", "lane_step")


def window_passes(nc: int, wn: int, defect: str = "") -> list[tuple[int, int]]:
    """(W, koff) of grouped.cu's window_passes over a window of wn <= nc entries: nc if wn == nc, else the binary
    digits of wn from the largest. Defect "pass<w>": the `wn & w` pass is not run."""
    if wn == nc:
        return [(nc, 0)]
    out, koff = [], 0
    for w in (4, 2, 1):
        if w < nc and wn & w:
            if defect != f"pass{w}":
                out.append((w, koff))
            koff += w
    return out


def lane_chunks(nchunks: int, defect: str = "") -> list[int]:
    """The chunks the 32 lanes take (`for (int c = lane; c < nchunks; c += 32)`), lane by lane. Defect
    "lane_step": whole lane steps only (`c - lane + 32 <= nchunks`)."""
    keep = (lambda c, lane: c - lane + 32 <= nchunks) if defect == "lane_step" else (lambda c, lane: c < nchunks)
    return [c for lane in range(32) for c in range(lane, nchunks, 32) if keep(c, lane)]


class Pass(NamedTuple):
    expert: int
    first: int  # the pass's first entry: wfirst + koff
    width: int
    reads: tuple  # the entries whose planes it reads (None: a plane nothing staged)
    row_lo: int
    row_hi: int
    window: int  # the staged window's entries
    restaged: bool


def schedule(launch: gn.MatrixLaunch, rows: int, groups: tuple[int, ...], grid_x: int,
             defect: str = "") -> Iterator[Pass]:
    """grouped.cu's expert_row_groups over every block (x, e): the passes of each window of each row group.
    Defects: "last_window" drops an expert's last window when it has several (`wfirst + NC <= end` but the
    first); "restage" never restages (a window of an expert of more than NC entries reads what is staged: nothing);
    "pass<w>" as window_passes."""
    offsets = np.concatenate([[0], np.cumsum(groups)]).astype(int)
    span = gn.WARPS * launch.rows
    nc = launch.entries
    for e in range(len(groups)):
        begin, end = int(offsets[e]), int(offsets[e + 1])
        if end <= begin:
            continue
        one_window = end - begin <= nc
        for bx in range(grid_x):
            staged = list(range(begin, end)) if one_window else []
            for grp in range(bx, launch.row_groups(rows), grid_x):
                for wfirst in range(begin, end, nc):
                    wn = min(nc, end - wfirst)
                    if defect == "last_window" and not one_window and wfirst > begin and wfirst + nc > end:
                        continue
                    if not one_window and defect != "restage":
                        staged = list(range(wfirst, wfirst + wn))
                    for w, koff in window_passes(nc, wn, defect):
                        reads = tuple(staged[koff + col] if koff + col < len(staged) else None for col in range(w))
                        yield Pass(e, wfirst + koff, w, reads, grp * span, min(rows, (grp + 1) * span), wn,
                                   not one_window)


def correct(launch: gn.MatrixLaunch, rows: int, nchunks: int, groups: tuple[int, ...], grid_x: int,
            defect: str = "") -> bool:
    """Whether the mirror stores every (entry, row) exactly once, from a pass of its own expert that reads its
    own entry's activations inside its window, and the lanes take every chunk of a dot once."""
    offsets = np.concatenate([[0], np.cumsum(groups)])
    count = np.zeros((int(offsets[-1]), rows), dtype=np.int64)
    for p in schedule(launch, rows, groups, grid_x, defect):
        own = tuple(range(p.first, p.first + p.width))
        inside = offsets[p.expert] <= p.first and p.first + p.width <= offsets[p.expert + 1] and p.width <= p.window
        if p.reads != own or not inside:
            return False
        count[p.first:p.first + p.width, p.row_lo:p.row_hi] += 1
    return bool((count == 1).all()) and sorted(lane_chunks(nchunks, defect)) == list(range(nchunks))


def matrices(case) -> tuple[tuple[str, gn.MatrixLaunch, int, int], ...]:
    """(kind, launch, rows, nchunks) of the case's two matrices under `new`."""
    return (("gateup", gn.GATEUP_LAUNCH, case.rows, case.cols // 32),
            ("down", gn.down_launch(mod.groups_of(case)), case.cols, case.rows // 32))


def reached(case) -> set[str]:
    """The paths of `new` the case reaches, as "kind:path"."""
    groups = mod.groups_of(case)
    out = {"empty_expert"} if 0 in groups else set()
    out.add("down:nc%d" % gn.down_launch(groups).entries)
    for kind, launch, rows, nchunks in matrices(case):
        passes = list(schedule(launch, rows, groups, 1))
        out |= {f"{kind}:pass{p.width}" for p in passes}
        out |= {f"{kind}:restaged" for p in passes if p.restaged}
        out |= {f"{kind}:last_window" for p in passes if p.restaged and p.window < launch.entries}
        if nchunks % 32:
            out.add(f"{kind}:lane_step")
    return out


def _name(gate: str, down: str, window: bool) -> str:
    if window:
        return f"grouped/{gate}/768x1280/n41/seed:1/down={down}/groups=11-0-1-17-3-9"
    return f"grouped/{gate}/512x1024/n35/seed:1/down={down}/groups=5-0-1-8-3-6-2-7-3"


ONE_WINDOW = [_name(g, d, False) for g in mod.GATE_FORMATS for d in mod.DOWN_FORMATS]
WINDOWS = [_name(g, d, True) for g, d in (("iq2_xxs", "iq4_nl"), ("iq3_s", "iq4_xs"), ("iq4_xs", "q2_0"),
                                         ("q2_0", "q2_0"), ("iq1_m", "iq4_nl"), ("iq2_xs", "iq4_xs"),
                                         ("iq2_s", "q2_0"), ("iq3_xxs", "iq4_nl"))]
EVERY = ONE_WINDOW + WINDOWS
# path -> the default cases that reach it (the window cases: gate/up windows 8 + 3, 8 + 8 + 1, 8 + 1 and down's NC 4
# windows of 4; groups 5, 6, 7 make the 4-entry pass of NC 8, which no window case has)
REACHED_BY = {
    "empty_expert": EVERY, "down:nc8": ONE_WINDOW, "down:nc4": WINDOWS,
    "gateup:pass8": EVERY, "gateup:pass4": ONE_WINDOW, "gateup:pass2": EVERY, "gateup:pass1": EVERY,
    "gateup:restaged": WINDOWS, "gateup:last_window": WINDOWS, "gateup:lane_step": WINDOWS,
    "down:pass8": ONE_WINDOW, "down:pass4": EVERY, "down:pass2": EVERY, "down:pass1": EVERY,
    "down:restaged": WINDOWS, "down:last_window": WINDOWS, "down:lane_step": EVERY,
}
# defect -> (kind -> the default cases whose schedule it breaks): exactly those that reach its path ("pass4" is
# window_passes' `wn & 4` branch, so NC 4's whole windows of 4 do not reach it)
EXPOSED_BY = {
    "pass4": {"gateup": ONE_WINDOW, "down": ONE_WINDOW},
    "pass2": {"gateup": EVERY, "down": EVERY},
    "pass1": {"gateup": EVERY, "down": EVERY},
    "last_window": {"gateup": WINDOWS, "down": WINDOWS},
    "restage": {"gateup": WINDOWS, "down": WINDOWS},
    "lane_step": {"gateup": WINDOWS, "down": EVERY},
}


def test_the_launch_table_and_the_kernels_new_compiles():
    assert gn.GATEUP_LAUNCH == (1, 8, 2, 1, True)
    assert gn.DOWN_LAUNCHES == ((8, (2, 8, 2, 0, True)), (None, (2, 4, 2, 4, True)))
    assert [gn.down_launch(g).entries for g in [(0,), (8, 8), (1, 8, 0), (9,), (0, 32), (3, 17)]] == [8, 8, 8, 4, 4, 4]
    own = FAMILY.variant("new").kernels(FAMILY, "grouped/grouped.cu")
    assert len(own) == len(set(own)) == 8 + 2 * 3
    assert own[0] == "grouped_gateup_new<siq::fmt_iq2_xxs, 1, 8, 2, 1, true>"
    assert own[8:] == [f"grouped_down_new<{traits(f)}, 2, {nc}, 2, {u}, true>" for nc, u in ((8, 0), (4, 4))
                       for f in mod.DOWN_FORMATS]
    assert FAMILY.variant("new").kernels(FAMILY, "q8_1/q8_1.cu") == []
    text = FAMILY.variant("new").description
    assert "mmvq_new's schedule" in text and "8 entries a pass where no expert has more than 8, else 4" in text


def test_window_passes_are_mmvqs_column_passes():
    for nc in (8, 4):
        for wn in range(1, nc + 1):
            widths = [w for w, _ in window_passes(nc, wn)]
            assert widths == ([nc] if wn == nc else column_passes(wn))
            assert [k for _, k in window_passes(nc, wn)] == [sum(widths[:i]) for i in range(len(widths))]


def test_the_default_cases_are_every_pair_then_a_window_case_per_gate_format():
    names = [c.name for c in FAMILY.default_cases()]
    assert names == EVERY
    assert {g for g, _ in mod.WINDOW_PAIRS} == set(mod.GATE_FORMATS)
    assert {d for _, d in mod.WINDOW_PAIRS} == set(mod.DOWN_FORMATS)


def test_each_path_of_new_is_reached_by_exactly_the_listed_default_cases():
    cases = FAMILY.default_cases()
    for path, expected in REACHED_BY.items():
        assert [c.name for c in cases if path in reached(c)] == expected, path
    assert set().union(*map(reached, cases)) == set(REACHED_BY)


def _grids(launch: gn.MatrixLaunch, rows: int, experts: int) -> list[int]:
    """Grid widths: one block per expert (every block loops), 264 resident blocks, one block per row group."""
    return sorted({gn.new_grid(launch, rows, experts, resident)[0] for resident in (experts, 264, 10 ** 6)})


def _every_output_once(cases) -> None:
    for case in cases:
        groups = mod.groups_of(case)
        for kind, launch, rows, nchunks in matrices(case):
            for grid_x in _grids(launch, rows, len(groups)):
                assert correct(launch, rows, nchunks, groups, grid_x), (case.name, kind, grid_x)


def test_the_schedule_stores_every_output_once_on_every_default_case():
    _every_output_once(FAMILY.default_cases())


@pytest.mark.slow  # the schedule mirrored over 14336 rows of 8 experts, 3 grids, 8 cases (about 20 s)
def test_the_schedule_stores_every_output_once_on_every_bench_case():
    _every_output_once(FAMILY.bench_cases())


@pytest.mark.parametrize("defect", DEFECTS)
def test_a_defect_in_a_tail_or_window_path_breaks_exactly_the_cases_that_reach_it(defect):
    broken: dict[str, list[str]] = {"gateup": [], "down": []}
    for case in FAMILY.default_cases():
        groups = mod.groups_of(case)
        for kind, launch, rows, nchunks in matrices(case):
            if not correct(launch, rows, nchunks, groups, 1, defect):
                broken[kind].append(case.name)
    assert broken == EXPOSED_BY[defect]


def test_grids_and_shared_bytes():
    g, d8, d4 = gn.GATEUP_LAUNCH, gn.DOWN_LAUNCHES[0][1], gn.DOWN_LAUNCHES[1][1]
    assert g.row_groups(14336) == 1792 and d8.row_groups(4096) == 256 and d4.row_groups(512) == 32
    assert gn.new_grid(g, 14336, 8, 264) == (33, 8)
    assert gn.new_grid(d8, 4096, 8, 132) == (16, 8)
    assert gn.new_grid(d8, 1024, 9, 5) == (1, 9)
    assert gn.new_grid(d8, 1024, 9, 10 ** 6) == (64, 9)
    assert g.dynamic_bytes(128) == 8 * 128 * 36 == q8_1_staging_bytes(8, 128)
    for launch, nchunks in ((g, 4096 // 32), (d8, 14336 // 32), (d4, 14336 // 32)):
        assert launch.dynamic_bytes(nchunks) + 4 * (2048 + 2) <= 227 * 1024  # sm_90's opt-in; iq1_m's table


@pytest.mark.parametrize("index,down", [(1, (4, 4)), (0, (8, 0))])  # 32 and 8 entries an expert
def test_a_launch_records_the_planned_kernels_grids_and_arguments(monkeypatch, index, down):
    stub_launch_helpers(monkeypatch, gn, resident=264)
    case = FAMILY.bench_cases()[index]  # iq2_xxs / iq4_nl
    per = 32 if index else 8
    assert (case.fmt, case.param("down"), case.ncols) == ("iq2_xxs", "iq4_nl", 8 * per)
    dev = {k: k for k in ("x", "xq", "hq", "gate", "up", "down", "offsets")}
    kernels = RecordingKernels()
    FAMILY.variant("new").launch(FAMILY, case, kernels, dev, {"H": "H", "Y": "Y"})
    nc, unroll = down
    assert kernels.names == ["quantize_q8_1", f"grouped_gateup_new<{traits('iq2_xxs')}, 1, 8, 2, 1, true>",
                             "quantize_q8_1", f"grouped_down_new<{traits('iq4_nl')}, 2, {nc}, 2, {unroll}, true>"]
    assert kernels.calls[0][3][:3] == ("x", np.int64(8 * per * 4096 // 32), "xq")
    _, grid, block, args, shared = kernels.calls[1]
    gs = row_stride("iq2_xxs", 4096)
    assert grid == (33, 8) and block == (256,) and shared == 8 * 128 * 36
    assert args == ("gate", "up", np.int64(gs), np.int64(gs * 14336), np.int32(14336), np.int32(128), "offsets",
                    "xq", "H")
    assert kernels.calls[2][3][:3] == ("H", np.int64(8 * per * 14336 // 32), "hq")
    _, grid, block, args, shared = kernels.calls[3]
    ds = row_stride("iq4_nl", 14336)
    assert grid == (33, 8) and block == (256,) and shared == nc * 448 * 36
    assert args == ("down", np.int64(ds), np.int64(ds * 4096), np.int32(4096), np.int32(448), "offsets", "hq", "Y")


@pytest.mark.slow  # an NVRTC compile of new's 14 kernels (about 10 s)
@pytest.mark.nvrtc
def test_new_compiles_for_sm_90_without_spills():
    from strata_bench.kernels.build import compile_source

    exprs = FAMILY.variant("new").kernels(FAMILY, "grouped/grouped.cu")
    built = compile_source("grouped/grouped.cu", exprs, "sm_90", use_cache=False)
    assert set(built.lowered) == set(exprs)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", built.log)
    assert len(spills) >= len(exprs) and all(s == ("0", "0") for s in spills), built.log
