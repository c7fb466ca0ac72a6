"""strata_bench/families/mmvq_onecol.py: which one-column passes of mmvq's `new` run mmvq_onecol (kernels_src/mmvq/
mmvq_onecol.cu), with what launch (stub kernels, no GPU); its default parity cases, and on the CPU
(tests/iq_host/onecol_emul.h: the product's decoders in the kernel's schedule) that they give old's bits and reach the
kernel's tail paths: a defect planted in each changes exactly the cases that reach it; its NVRTC build."""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

from strata_bench.families import mmvq as mmvq_mod
from strata_bench.families import mmvq_mma, mmvq_onecol
from strata_bench.families.mmvq import Mmvq, new_config
from strata_bench.families.mmvq_onecol import ONECOL_CONFIGS, ONECOL_SOURCE, onecol_config
from tests.stub_kernels import RecordingKernels, stub_launch_helpers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from iq_host import harness

FORMATS = ("iq2_xxs", "iq1_s", "iq1_m")
TAILS = ["mmvq/iq2_xxs/131077x256/n1/seed:1", "mmvq/iq1_s/131077x256/n1/seed:1", "mmvq/iq1_m/131077x256/n1/seed:1"]
# defect (onecol_emul.h) -> the default one-column cases whose data must expose it
EXPOSED_BY = {"tail_group": TAILS,  # 131077 rows: a last row group of 5
              # 8 chunks: no lane has a whole step (1024 columns: 32 chunks, one whole step); iq1_m's weight sets
              # are both 256 columns wide
              "lane_steps": [*TAILS[:2], "mmvq/iq1_m/131072x256/n1/seed:1", TAILS[2]]}


def test_the_config_rows_are_the_measured_launches():
    """onecol-m of experiments/mmvq_onecol, as timed (PERF_NOTES v13): iq2_xxs mul7 r2m4u4, iq1_s tern r4m3u4; and
    experiments/mmvq_onecol1m's s32 (v18): iq1_m's selector table r4m3u4."""
    assert {fmt: c.kernel for fmt, c in ONECOL_CONFIGS.items()} == {
        "iq2_xxs": "mmvq_onecol<onecol::Iq2xxsMul7, 2, 4, 4>", "iq1_s": "mmvq_onecol<onecol::Iq1sTern, 4, 3, 4>",
        "iq1_m": "mmvq_onecol<onecol::Iq1mSel<false>, 4, 3, 4>"}
    assert [c.label for c in ONECOL_CONFIGS.values()] == ["onecol-mul7 r2m4u4", "onecol-tern r4m3u4",
                                                          "onecol-sel32 r4m3u4"]
    assert {c.min_rows for c in ONECOL_CONFIGS.values()} == {131072}
    # static: iq2_xxs's restaged grid and 32 copies of A; iq1_s's 2048 u16 selectors and 32 copies of A_LO and A_HI
    assert ONECOL_CONFIGS["iq2_xxs"].static_bytes == 4 * (256 + 32)
    assert ONECOL_CONFIGS["iq1_s"].static_bytes == 4 * (1024 + 64)
    assert ONECOL_CONFIGS["iq1_m"].static_bytes == 4 * (4096 + 64)  # 4096 selector words, 32 copies of K0 and K1
    # dynamic, per activation block: 32 code bytes, the scale, and tern's code sum
    assert ONECOL_CONFIGS["iq2_xxs"].dynamic_bytes(256) == 256 * 36
    assert ONECOL_CONFIGS["iq1_s"].dynamic_bytes(256) == 256 * 40
    assert ONECOL_CONFIGS["iq1_m"].dynamic_bytes(256) == 256 * 36


def test_only_tall_one_column_passes_of_the_listed_formats_run_mmvq_onecol():
    for fmt in FORMATS:
        assert onecol_config(fmt, 1, 131072) is ONECOL_CONFIGS[fmt]
        assert onecol_config(fmt, 1, 131071) is None  # below the measured shape: today's launch
        for nc in (2, 4, 8):
            assert onecol_config(fmt, nc, 131072) is None
    for fmt in ("iq3_xxs", "iq2_xs", "iq4_nl", "q8_0"):
        assert onecol_config(fmt, 1, 1 << 20) is None


def test_new_compiles_the_onecol_kernels_from_their_source():
    fam = Mmvq()
    assert ONECOL_SOURCE in fam.sources
    assert fam.name_expressions(ONECOL_SOURCE) == [c.kernel for c in ONECOL_CONFIGS.values()]


@pytest.fixture
def kernels(monkeypatch):
    stub_launch_helpers(monkeypatch, mmvq_mod, mmvq_mma, mmvq_onecol, resident=132)
    return RecordingKernels()


def _launch(kernels, fmt, rows, cols, ncols, variant="new"):
    fam = Mmvq()
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((ncols, cols), np.float32),
           "xq": np.zeros((ncols, cols // 32 * 36), np.uint8)}
    fam.launch(fam.case(fmt, rows, cols, ncols, "seed:1"), variant, kernels, dev,
               {"y": np.zeros((ncols, rows), np.float32)})
    return kernels.names


@pytest.mark.parametrize("fmt", FORMATS)
def test_new_runs_mmvq_onecol_for_the_tall_one_column_pass(kernels, fmt):
    config = ONECOL_CONFIGS[fmt]
    assert _launch(kernels, fmt, 131072, 8192, 1) == ["quantize_q8_1", config.kernel]
    _, grid, block, args, shared = kernels.calls[1]
    assert grid == (132,) and block == (256,)  # 131072 / (8 R) row groups: the resident blocks loop over them
    assert shared == config.dynamic_bytes(256) and args[2] == 131072 and args[3] == 256
    assert args[1] == mmvq_mod.row_stride(fmt, 8192) and args[6] == 131072
    assert args[4].shape == (1, 256 * 36) and args[5].shape == (1, 131072)
    kernels.calls.clear()  # 11 columns: the tensor cores' 8, mmvq_new's 2, then mmvq_onecol at column 10
    assert _launch(kernels, fmt, 131072, 8192, 11) == [
        "quantize_q8_1", mmvq_mma.MMA_CONFIGS[fmt].kernel(fmt), new_config(fmt, 2).kernel(fmt, 2), config.kernel]
    assert kernels.calls[-1][3][4].shape == (1, 256 * 36) and kernels.calls[-1][3][5].shape == (1, 131072)


@pytest.mark.parametrize("fmt", FORMATS)
def test_shorter_passes_and_other_variants_keep_their_launch(kernels, fmt):
    assert _launch(kernels, fmt, 131071, 8192, 1) == ["quantize_q8_1", new_config(fmt, 1).kernel(fmt, 1)]
    kernels.calls.clear()
    assert _launch(kernels, fmt, 4096, 14336, 1) == ["quantize_q8_1", new_config(fmt, 1).kernel(fmt, 1)]
    kernels.calls.clear()
    assert _launch(kernels, fmt, 131072, 8192, 1, "old") == ["quantize_q8_1", f"mmvq_old<siq::fmt_{fmt}>"]
    kernels.calls.clear()  # the launch candidates of experiments/mmvq_tune time their own configs
    fam = Mmvq()
    case = fam.case(fmt, 131072, 8192, 1, "seed:1")
    fam.launch_new_passes(case, kernels, {"w": None, "x": np.zeros((1, 8192), np.float32),
                                          "xq": np.zeros((1, 256 * 36), np.uint8)},
                          {"y": np.zeros((1, 131072), np.float32)}, new_config)
    assert kernels.names == ["quantize_q8_1", new_config(fmt, 1).kernel(fmt, 1)]


def test_other_formats_keep_mmvq_new_at_one_column(kernels):
    new = new_config("iq3_xxs", 1).kernel("iq3_xxs", 1)
    assert _launch(kernels, "iq3_xxs", 131072, 8192, 1) == ["quantize_q8_1", new]


# --- parity cases --------------------------------------------------------------------------------------------
def onecol_weight_sets() -> list:
    """The one-column default case of each weight set whose one-column pass runs mmvq_onecol."""
    return [c for c in Mmvq().default_cases() if c.ncols == 1 and onecol_config(c.fmt, 1, c.rows) is not None]


def test_parity_runs_mmvq_onecol_on_whole_and_partial_row_groups_of_every_format():
    names = [c.name for c in onecol_weight_sets()]
    assert names == ["mmvq/iq2_xxs/131072x1024/n1/seed:1", TAILS[0], "mmvq/iq1_s/131072x1024/n1/seed:1", TAILS[1],
                     "mmvq/iq1_m/131072x256/n1/seed:1", TAILS[2]]
    for case in onecol_weight_sets():
        group = 8 * ONECOL_CONFIGS[case.fmt].rows
        assert case.rows % group == (5 if case.name in TAILS else 0)
    # every default case whose passes end in mmvq_onecol shares the weights of one of them
    sets = {(c.fmt, c.rows, c.cols, c.data) for c in onecol_weight_sets()}
    for c in Mmvq().default_cases():
        if c.ncols % 2 and onecol_config(c.fmt, 1, c.rows) is not None:
            assert (c.fmt, c.rows, c.cols, c.data) in sets, c.name


def last_two_groups(case) -> tuple[np.ndarray, np.ndarray]:
    """The case's raw weights from the start of its second-to-last row group (groups are independent; the window
    keeps the last row to clamp to), and its one column's q8_1 activations."""
    group = 8 * ONECOL_CONFIGS[case.fmt].rows
    host = Mmvq().make_inputs(case)
    start = max(0, ((case.rows - 1) // group - 1) * group)
    return host["raw"][start:], host["act"][:1]


def _onecol(case, raw, act, defect: str = "") -> np.ndarray:
    return harness.run_dot(case.fmt, raw, case.cols, act, mode="dot_onecol", defect=defect,
                           extra=(str(ONECOL_CONFIGS[case.fmt].rows),))


@pytest.fixture(scope="module")
def windows() -> dict:
    """Per weight set: (its case, raw window, activations, the correct schedule's y)."""
    out = {}
    for case in onecol_weight_sets():
        raw, act = last_two_groups(case)
        out[case.name] = (case, raw, act, _onecol(case, raw, act))
    return out


def _bits(y: np.ndarray) -> np.ndarray:
    return y.view(np.uint32)


def test_the_schedule_with_the_products_decoders_gives_old_bits_on_every_window(windows):
    for case, raw, act, onecol in windows.values():
        old = harness.run_dot(case.fmt, raw, case.cols, act)
        assert np.array_equal(_bits(old), _bits(onecol)), case.name


@pytest.mark.parametrize("defect", sorted(EXPOSED_BY))
def test_a_defect_in_each_tail_path_changes_the_bits_of_exactly_its_cases(windows, defect):
    exposed = []
    for case, raw, act, good in windows.values():
        if not np.array_equal(_bits(_onecol(case, raw, act, defect)), _bits(good)):
            exposed.append(case.name)
    assert exposed == EXPOSED_BY[defect]


@pytest.mark.slow  # two builds of the host driver (about 10 s each on 2 cores)
def test_a_defect_inside_a_moved_decoder_changes_every_output_of_its_format(windows):
    """The comparison above has teeth inside the decoders too: onecol_dec.cuh's mul7 with the 8th sign off its bit,
    tern with the pair (-1, 0) read as (-1, 1) (the planted-defect macros) change every output of the windows of
    their format, and none of the other's."""
    for fmt, define in (("iq2_xxs", "ONECOL_MUL7_PARITY_BIT=29"), ("iq1_s", "ONECOL_TERN_REPLICATED=4")):
        build = harness.binary(defines=(define,))
        for case, raw, act, good in windows.values():
            bad = harness.run_dot(case.fmt, raw, case.cols, act, mode="dot_onecol", build=build,
                                  extra=(str(ONECOL_CONFIGS[case.fmt].rows),))
            differ = int((_bits(bad) != _bits(good)).sum())
            assert differ == (good.size if case.fmt == fmt else 0), (define, case.name, differ)


# --- the build -------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _built():
    from strata_bench.kernels.build import compile_source

    return compile_source(ONECOL_SOURCE, Mmvq().name_expressions(ONECOL_SOURCE), "sm_90")


@pytest.mark.slow  # an NVRTC compile (about 5 s)
@pytest.mark.nvrtc
def test_the_kernels_compile_without_spills_with_the_declared_static_shared_memory():
    from strata_bench.kernels.build import parse_resources

    built = _built()
    resources = {r.kernel: r for r in parse_resources(built.log, built.lowered)}
    for config in ONECOL_CONFIGS.values():
        r = resources[config.kernel]
        assert (r.spill_stores, r.spill_loads, r.stack_bytes) == (0, 0, 0), r
        assert r.shared_bytes == config.static_bytes, r
        assert r.registers <= 65536 // (256 * config.min_blocks), r  # __launch_bounds__(256, MINB) holds
