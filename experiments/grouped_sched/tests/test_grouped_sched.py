"""experiments/grouped_sched: the host-side planning exactly (the schedule mirror over every parity and bench
case: each H and Y element stored exactly once, by a pass that reads its own entry's staged activations inside
the staged window; the pass widths are mmvq's column_passes; the grids, shared bytes, kernel names and
arguments of a launch, recorded), the variant table and cases, and the kernels: they compile for sm_90 through
the project's NVRTC path without spills."""
from __future__ import annotations

import re

import numpy as np
import pytest

from strata_bench.families.mmvq import column_passes
from strata_bench.kit import builtin_family, q8_1_staging_bytes, row_stride, traits
from tests.cases_file import load_cases_file

SCHED = load_cases_file("experiments/grouped_sched/cases.py")


def test_formats_and_variants_extend_the_built_in_family():
    grouped = builtin_family("grouped")()
    defaults = grouped.default_cases()
    assert set(SCHED.GATE_FORMATS) == {c.fmt for c in defaults}
    assert set(SCHED.DOWN_FORMATS) == {c.param("down") for c in defaults}
    fam = SCHED.GroupedSched()
    names = [v.name for v in fam.variants]
    assert names == ["old", "new", "sched-gr1n8m2u1f-dr2n8m2u0f", "sched-gr1n8m2u1f-dr2n4m2u4f"]
    own = fam.name_expressions(SCHED.OWN_SOURCE)
    assert len(own) == len(set(own)) == 8 + 2 * 3  # the two candidates share their gate/up kernels
    assert "grouped_sched_gateup<siq::fmt_iq2_xxs, 1, 8, 2, 1, true>" in own
    assert "grouped_sched_down<siq::fmt_iq4_nl, 2, 4, 2, 4, true>" in own
    assert "grouped_sched_down<siq::fmt_q2_0, 2, 8, 2, 0, true>" in own


def test_cases_are_the_built_in_defaults_and_bench_plus_several_windows():
    fam = SCHED.GroupedSched()
    grouped = builtin_family("grouped")()
    key = lambda c: (c.fmt, c.rows, c.cols, c.ncols, c.params)
    cases = fam.default_cases()
    assert [key(c) for c in cases[:24]] == [key(c) for c in grouped.default_cases()]
    windows = cases[24:]
    assert [(c.fmt, c.param("down")) for c in windows] == list(SCHED.WINDOW_PAIRS)
    assert all((c.rows, c.cols, c.param("groups"), c.ncols) == (768, 1280, "11-0-1-17-3-9", 41) for c in windows)
    assert [key(c) for c in fam.bench_cases()] == [key(c) for c in grouped.bench_cases()]
    for c in cases + fam.bench_cases():
        assert set(c.variants) == {v.name for v in fam.variants}


@pytest.mark.parametrize("nc", [8, 4, 2])
def test_window_passes_are_mmvqs_column_passes(nc):
    for wn in range(1, nc + 1):
        passes = SCHED.window_passes(nc, wn)
        widths = [w for w, _ in passes]
        assert widths == ([nc] if wn == nc else column_passes(wn))
        assert [k for _, k in passes] == [sum(widths[:i]) for i in range(len(widths))]
        assert sum(widths) == wn and all(w <= nc for w in widths)


def _check_schedule(launch, rows, groups, grid_x):
    """Every (entry, row) stored exactly once, by a pass of its own expert whose reads stay in the window."""
    offsets = np.concatenate([[0], np.cumsum(groups)])
    count = np.zeros((int(offsets[-1]), rows), dtype=np.int64)
    for e, bx, grp, wfirst, wn, w, koff, lo, hi in SCHED.sched_passes(launch, rows, groups, grid_x):
        assert grp % grid_x == bx and 1 <= wn <= launch.entries and koff + w <= wn
        assert offsets[e] <= wfirst and wfirst + wn <= offsets[e + 1]
        # the planes hold wn * nchunks blocks: the largest index read, (koff + w - 1) * nchunks + nchunks - 1,
        # is inside, and the dynamic shared memory holds NC entries' planes
        assert wn <= launch.entries
        count[wfirst + koff:wfirst + koff + w, lo:hi] += 1
    assert (count == 1).all(), np.argwhere(count != 1)[:5]


def _groups(case):
    return tuple(int(g) for g in case.param("groups").split("-"))


@pytest.mark.slow  # the schedule emulated over every case and grid (4-7 s each)
@pytest.mark.parametrize("config", SCHED.SCHED_CONFIGS, ids=lambda c: c.label)
def test_schedule_stores_every_output_once_on_every_case(config):
    fam = SCHED.GroupedSched()
    for case in fam.default_cases() + fam.bench_cases():
        groups = _groups(case)
        for launch, rows in ((config.gate, case.rows), (config.down, case.cols)):
            # grids of one block per expert (every block loops), the H200's at 2 blocks an SM, and one
            # block per row group
            for resident in (len(groups), 264, 10 ** 6):
                grid = SCHED.sched_grid(launch, rows, len(groups), resident)
                assert grid[1] == len(groups) and 1 <= grid[0] <= launch.row_groups(rows)
                _check_schedule(launch, rows, groups, grid[0])


def test_grid_and_shared_bytes():
    g = SCHED.MatrixLaunch(1, 8, 2, 1)
    d = SCHED.MatrixLaunch(2, 8, 2, 0)
    assert g.row_groups(14336) == 1792 and d.row_groups(4096) == 256 and d.row_groups(512) == 32
    assert SCHED.sched_grid(g, 14336, 8, 264) == (33, 8)
    assert SCHED.sched_grid(d, 4096, 8, 132) == (16, 8)
    assert SCHED.sched_grid(d, 1024, 9, 5) == (1, 9)
    assert SCHED.sched_grid(d, 1024, 9, 10 ** 6) == (64, 9)
    assert g.dynamic_bytes(128) == 8 * 128 * 36 == q8_1_staging_bytes(8, 128)
    optin = 227 * 1024
    for cfg in SCHED.SCHED_CONFIGS:
        for launch, nchunks in ((cfg.gate, 4096 // 32), (cfg.down, 14336 // 32)):
            assert launch.dynamic_bytes(nchunks) + 4 * (2048 + 2) <= optin  # the largest table: iq1_m's


class _Recorder:
    def __init__(self):
        self.calls = []

    def get(self, name):
        def fn(grid, block, args, shared_mem=0, stream=None):
            self.calls.append((name, grid, block, args, shared_mem))
        fn.ptr = name
        return fn


def test_launch_records_the_planned_kernels_grids_and_arguments(monkeypatch):
    monkeypatch.setattr(SCHED, "resident_blocks", lambda fn, threads, shared: 264)
    monkeypatch.setattr(SCHED, "allow_dynamic_shared", lambda fn, nbytes, static_bytes=0: None)
    fam = SCHED.GroupedSched()
    case = fam.bench_cases()[1]  # iq2_xxs / iq4_nl, 32 entries per expert
    assert (case.fmt, case.param("down"), case.ncols) == ("iq2_xxs", "iq4_nl", 256)
    dev = {k: k for k in ("x", "xq", "hq", "gate", "up", "down", "offsets")}
    outs = {"H": "H", "Y": "Y"}
    kernels = _Recorder()
    fam.variant("sched-gr1n8m2u1f-dr2n4m2u4f").launch(fam, case, kernels, dev, outs)
    names = [c[0] for c in kernels.calls]
    assert names == ["quantize_q8_1", f"grouped_sched_gateup<{traits('iq2_xxs')}, 1, 8, 2, 1, true>",
                     "quantize_q8_1", f"grouped_sched_down<{traits('iq4_nl')}, 2, 4, 2, 4, true>"]
    _, qgrid, _, qargs, _ = kernels.calls[0]
    assert qargs[:2] == ("x", np.int64(256 * 4096 // 32)) and qargs[2] == "xq"
    _, grid, block, args, shared = kernels.calls[1]
    gs = row_stride("iq2_xxs", 4096)
    assert grid == (33, 8) and block == (256,) and shared == 8 * 128 * 36
    assert args == ("gate", "up", np.int64(gs), np.int64(gs * 14336), np.int32(14336), np.int32(128), "offsets",
                    "xq", "H")
    assert kernels.calls[2][3][:3] == ("H", np.int64(256 * 14336 // 32), "hq")
    _, grid, block, args, shared = kernels.calls[3]
    ds = row_stride("iq4_nl", 14336)
    assert grid == (33, 8) and shared == 4 * 448 * 36
    assert args == ("down", np.int64(ds), np.int64(ds * 4096), np.int32(4096), np.int32(448), "offsets", "hq", "Y")


@pytest.mark.slow  # an NVRTC compile of every candidate (about 7 s)
@pytest.mark.nvrtc
def test_kernels_compile_for_sm_90_without_spills():
    from strata_bench.kernels.build import compile_source

    exprs = SCHED.GroupedSched().name_expressions(SCHED.OWN_SOURCE)
    built = compile_source(SCHED.OWN_SOURCE, exprs, "sm_90", root=SCHED.KERNELS)
    assert set(built.lowered) == set(exprs)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", built.log)
    assert len(spills) >= len(exprs) and all(s == ("0", "0") for s in spills), built.log


def test_the_schedule_check_catches_a_dropped_tail_pass(monkeypatch):
    """A mirror that drops a window's last 1-wide pass (as a kernel missing its odd tail would) fails the
    exactly-once check on the default groups (5 = 4 + 1, 7 = 4 + 2 + 1, 3 = 2 + 1, 1)."""
    real = SCHED.window_passes
    monkeypatch.setattr(SCHED, "window_passes", lambda nc, wn: [p for p in real(nc, wn) if p[0] != 1])
    with pytest.raises(AssertionError):
        _check_schedule(SCHED.MatrixLaunch(1, 8, 2, 1), 512, (5, 0, 1, 8, 3, 6, 2, 7, 3), 4)
