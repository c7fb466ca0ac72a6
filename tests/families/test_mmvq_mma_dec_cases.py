"""scripts/mmvq_mma_dec.py, the --cases file of mmvq_mma_dec: its variant table, which passes mmad runs with
which tile groups, and its cases (tests/families/test_mmvq_mma_dec.py compiles kernels it names)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.cases_file import load_cases_file
from tests.families.test_mmvq_mma_dec import FORMATS


@pytest.fixture(scope="module")
def script():
    return load_cases_file("scripts/mmvq_mma_dec.py")


def test_family_has_old_new_and_both_mmads_and_compiles_them_from_their_own_source(script):
    fam = script.MmvqMmaDec()
    assert [v.name for v in fam.variants] == ["old", "new", "mmad", "mmad2"]
    assert fam.sources == ("q8_1/q8_1.cu", "mmvq/mmvq.cu", "mmvq/mmvq_mma.cu", "mmvq/mmvq_mma_dec.cu")
    names = fam.name_expressions("mmvq/mmvq_mma_dec.cu")
    assert names == [f"mmvq_mma_dec<siq::fmt_{f}, {tg}, 1, {pf}>" for pf in (0, 1)
                     for f in script.MMA_DEC_PASS.formats for tg in (4, 2)]
    assert set(script.MMA_DEC_PASS.formats) == set(FORMATS)
    assert not any("mma" in e for e in fam.name_expressions("mmvq/mmvq.cu"))


def test_mmad_runs_8_column_passes_with_the_most_tile_groups_that_fit(script):
    p = script.MMA_DEC_PASS
    for fmt in FORMATS:
        assert p.launch_groups(fmt, 8, 256) == 4  # K = 8192: 16 warps, even with iq1's 8 KiB table
        assert p.launch_groups(fmt, 8, 448) == 2  # K = 14336
        assert p.launch_groups(fmt, 4, 256) is None and p.launch_groups(fmt, 8, 4096) is None
    dynamic, static = p.shared_bytes("iq1_s", 256, 4)
    assert dynamic == 8 * 256 * 36 + 16 * 6272 + 4 * 3 * 32 * 32 * 4 and static == 2050 * 4  # table + K0, K1 (ptxas pads to 8208)
    assert dynamic + static <= 227 * 1024


def test_cases_cover_every_format_part_tiles_short_k_edge_data_and_the_dram_shape(script):
    fam = script.MmvqMmaDec()
    cases = list(fam.default_cases())
    assert {c.fmt for c in cases} == set(FORMATS) and {c.ncols for c in cases} == {8, 11}
    shapes = {(c.fmt, c.rows, c.cols) for c in cases}
    assert {("q8_0", 24, 544), ("q2_0", 24, 576), ("iq2_s", 24, 768), ("iq1_m", 1000, 1536)} <= shapes
    assert {(f, 48, 14336) for f in FORMATS} <= shapes  # the TG = 2 kernels
    assert all(any(c.data.startswith("edge") and c.fmt == f for c in cases) for f in FORMATS)
    assert all(c.variants == ("old", "new", "mmad", "mmad2") for c in cases)
    bench = {(c.fmt, c.rows, c.cols, c.ncols) for c in fam.bench_cases()}
    assert bench == {(f, 131072, 8192, 8) for f in FORMATS}


@pytest.mark.parametrize("variant,pf", [("mmad", 0), ("mmad2", 1)])
def test_mmad_launches_mmvq_mma_dec_for_the_8_column_pass_and_new_for_the_rest(script, monkeypatch, variant, pf):
    """The launch path without a GPU: stub kernels record their launches (grid, block, args, shared)."""
    from strata_bench.families import mmvq as family_mod

    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, script, family_mod)
    kernels = RecordingKernels()
    calls = kernels.calls
    fam = script.MmvqMmaDec()
    case = fam.case("iq2_xs", 1000, 1536, 11, "seed:1")
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 1536), np.float32), "xq": np.zeros((11, 48 * 36), np.uint8)}
    outs = {"y": np.zeros((11, 1000), np.float32)}
    fam.launch(case, variant, kernels, dev, outs)
    names = [c[0] for c in calls]
    assert names[0] == "quantize_q8_1" and names[1] == f"mmvq_mma_dec<siq::fmt_iq2_xs, 4, 1, {pf}>"
    # 11 columns: the 8-column pass, then new's own 2- and 1-column passes (iq2_xs's 1-column one is lean)
    assert names[2:] == ["mmvq_new<siq::fmt_iq2_xs, 2, 2, 3, 4>", "mmvq_new<siq::fmt_iq2_xs_lean, 1, 4, 3, 4>"]
    _, grid, block, args, shared = calls[1]
    assert grid == (16,) and block == (512,)  # 63 tiles, 4 per block
    assert shared == 8 * 48 * 36 + 16 * 6272 + 4 * 3 * 32 * 32 * 4  # 8 columns' q8_1, 16 warp tiles, 4 trees
    assert args[2] == 1000 and args[3] == 48 and args[4].shape == (8, 48 * 36) and args[5].shape == (8, 1000)
