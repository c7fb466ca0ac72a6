"""scripts/q2warp_tune.py and q2warp's NewConfig: kernel names and the candidate list, exactly."""
from __future__ import annotations

from strata_bench.families.q2warp import NEW_CONFIGS, NewConfig
from tests.cases_file import load_cases_file


def _tune():
    return load_cases_file("scripts/q2warp_tune.py")


def test_default_config_keeps_the_kernel_names():
    assert [NEW_CONFIGS[n].kernel(n) for n in (1, 2, 3, 4)] == [f"q2warp_new<{n}, 4>" for n in (1, 2, 3, 4)]


def test_config_names_spell_every_knob_and_min_warps_only_at_one_column():
    c = NewConfig(8, 24, 2, True, 2)
    assert c.kernel(1) == "q2warp_new<1, 8, 24, 2, true, 2>"
    assert c.kernel(3) == "q2warp_new<3, 8, 0, 2, true, 2>"
    assert c.label == "w8m24d2es2" and c.rows_per_block() == 64 and c.static_shared() == 2 * 5120


def test_candidates():
    fam = _tune().Q2WarpTune()
    assert [v.name for v in fam.variants] == ["old", "new", "w4m0d1es1", "w4m0d1es4", "w4m24d2es1", "w4m24d2es4",
                                              "w8m24d2es2", "w4m24d2es8", "w4m0d1s4"]
    assert [(c.rows, c.cols, c.ncols) for c in fam.bench_cases()] == [(131072, 8192, n) for n in (1, 2, 3, 4)]
