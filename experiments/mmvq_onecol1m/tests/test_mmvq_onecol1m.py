"""experiments/mmvq_onecol1m: iq1_m's selector-table decoder on the CPU (tests/onecol1m_host.cpp, with
mmvq_onecol's driver: the kernel's own decoder, tables, activation staging and lane walk, bit for bit against one
warp per row as mmvq_old computes it, on every shape of the experiment's parity cases, with planted defects caught),
the variants, the launch path and cases, and the kernels: they compile for sm_90 through the project's NVRTC path
without spills, with the static shared memory the launch declares, and (with cuobjdump) issue fewer instructions a
chunk than new's one-column iq1_m loop."""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cases_file import load_cases_file

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from iq_host import onecol_driver  # noqa: E402

OC1M = load_cases_file("experiments/mmvq_onecol1m/cases.py")
HERE = Path(__file__).resolve().parent
DECODERS = ("iq1_m:s64", "iq1_m:s32")
# Every (rows, cols, columns, data) of the experiment's parity cases: the small ones run new's launch on the GPU
# (fewer rows than MIN_ROWS), so this is where the candidates' decoder meets them, the fixture's real rows included.
CASES = sorted({(c.rows, c.cols, c.ncols, c.data) for c in OC1M.MmvqOneCol1m().default_cases()})
_built = functools.partial(onecol_driver.compile_experiment, OC1M, OC1M.MmvqOneCol1m)  # the NVRTC build, once


def _old_and_mine(decoder, rows, cols, ncols, data, defect="", defines=()):
    """old's y and the host driver's (tests/onecol1m_host.cpp: -D `defines`, ONECOL_DEFECT `defect`)."""
    return onecol_driver.old_and_driver(OC1M.MmvqOneCol1m(), HERE / "onecol1m_host.cpp", OC1M.KERNELS, decoder,
                                        "iq1_m", rows, cols, ncols, data, defect, defines)


@pytest.mark.slow  # host emulation: builds and runs the C++ driver and tests/iq_host's (1-10 s a case)
@pytest.mark.parametrize("rows,cols,ncols,data", CASES)
def test_the_selector_decoders_equal_one_warp_per_row_bitwise(rows, cols, ncols, data):
    for decoder in DECODERS:
        old, mine = _old_and_mine(decoder, rows, cols, ncols, data)
        assert old.shape == mine.shape == (ncols, rows)
        differ = onecol_driver.differing(old, mine)
        assert differ == 0, f"{decoder}: {differ} of {old.size} outputs differ"


# Planted: the delta read from the index's bit 10 (a grid index bit) instead of 11; the delta moving half the
# selector nibbles only; ls1 read two bits off; d from the scale words' low bytes; d_act staged without its 1/8.
PLANTED = [("", ("ONECOL1M_NEG_BIT=10",)), ("", ("ONECOL1M_NEG=0x40404040u",)), ("", ("ONECOL1M_LS1_SHIFT=4",)),
           ("", ("ONECOL1M_D_SEL=0x6420u",)), ("scale", ())]


@pytest.mark.slow  # host emulation (a -D build about 3 s more)
@pytest.mark.parametrize("defect,defines", PLANTED)
def test_a_planted_defect_changes_most_outputs_of_both_decoders(defect, defines):
    for decoder in DECODERS:
        old, mine = _old_and_mine(decoder, 40, 1536, 1, "seed:7", defect, defines)
        assert onecol_driver.differing(old, mine) > old.size // 2, decoder


def test_the_variants_and_cases():
    fam = OC1M.MmvqOneCol1m()
    assert [v.name for v in fam.variants] == ["old", "new", "onecol1m-s64", "onecol1m-s32"]
    assert OC1M.CANDIDATES[0].kernel == "mmvq_onecol<onecol::Iq1mSel<true>, 4, 3, 4>"
    assert [c.static_bytes for c in OC1M.CANDIDATES] == [33024, 16640]
    assert fam.name_expressions(OC1M.OWN_SOURCE) == [c.kernel for c in OC1M.CANDIDATES]
    cases = fam.default_cases()
    assert {c.fmt for c in cases} == {"iq1_m"} and {c.ncols for c in cases} == {1, 11}
    assert {(c.rows, c.cols) for c in cases if c.data == "seed:1"} == {
        (8192, 2560), (16384, 512), (37, 1280), (3, 256), (1000, 14336), (131072, 256), (131077, 256)}
    assert {(c.rows, c.cols) for c in cases if c.data.startswith("edge")} == {(512, 2560), (131072, 256)}
    assert any(c.data.startswith("fixture") for c in cases)
    assert [(c.fmt, c.rows, c.cols, c.ncols) for c in fam.bench_cases()] == [("iq1_m", 131072, 8192, 1)]


def _launches(monkeypatch, label, fmt, rows, ncols):
    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma, mmvq_onecol
    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, family_mod, mmvq_mma, mmvq_onecol, resident=132)
    fam, kernels = OC1M.MmvqOneCol1m(), RecordingKernels()
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((ncols, 2560), np.float32),
           "xq": np.zeros((ncols, 80 * 36), np.uint8)}
    fam.launch(fam.case(fmt, rows, 2560, ncols, "seed:1"), label, kernels, dev,
               {"y": np.zeros((ncols, rows), np.float32)})
    return kernels


@pytest.mark.parametrize("index", range(len(OC1M.CANDIDATES)))
def test_a_candidate_runs_its_kernel_for_the_tall_one_column_pass_only(monkeypatch, index):
    """Stub kernels record the launches: an 11-column iq1_m case of MIN_ROWS rows runs new's mmvq_new 8- and
    2-column passes, then the candidate's kernel on new's grid; fewer rows, or another format, run new's launch."""
    from strata_bench.families import mmvq as family_mod
    from strata_bench.kit import ceil_div

    cand, rows = OC1M.CANDIDATES[index], OC1M.MIN_ROWS
    kernels = _launches(monkeypatch, cand.label, "iq1_m", rows, 11)
    assert kernels.names == ["quantize_q8_1", family_mod.new_config("iq1_m", 8).kernel("iq1_m", 8),
                             family_mod.new_config("iq1_m", 2).kernel("iq1_m", 2), cand.kernel]
    _, grid, block, args, shared = kernels.calls[-1]
    assert grid == (min(ceil_div(rows, 8 * cand.rows), 132),) and block == (256,)
    assert shared == 80 * OC1M.ACT_BYTES and args[2] == rows and args[3] == 80
    assert args[4].shape == (1, 80 * 36) and args[5].shape == (1, rows)
    for fmt, rows in (("iq1_m", OC1M.MIN_ROWS - 1), ("iq1_s", OC1M.MIN_ROWS)):
        assert (_launches(monkeypatch, cand.label, fmt, rows, 11).names
                == _launches(monkeypatch, "new", fmt, rows, 11).names)


@pytest.mark.slow  # an NVRTC compile, then cuobjdump
@pytest.mark.nvrtc
@onecol_driver.needs_cuobjdump
def test_the_selector_loop_issues_fewer_instructions_a_chunk_than_new_with_no_more_global_loads():
    """Per chunk of the unrolled step loop (8 dp4a a chunk in both): new's iq1_m one-column loop (mmvq_new with the
    format's decode) against s64 and s32: under 0.8x the instructions a chunk, no more LDG, one LDS a group
    (with the staged activations' loads, shared by the R rows)."""
    from strata_bench.kernels.build import compile_source

    def per_chunk(built, kernel, chunks):
        return onecol_driver.loop_per_chunk(built, kernel, 8 * chunks, chunks, onecol_driver.CUOBJDUMP)

    cfg = OC1M.Mmvq.new_config("iq1_m", 1)
    new_kernel = cfg.kernel("iq1_m", 1)
    new_ops, new_total = per_chunk(compile_source("mmvq/mmvq.cu", [new_kernel], "sm_90"), new_kernel,
                                   cfg.rows * cfg.unroll)
    for cand in OC1M.CANDIDATES:
        ops, total = per_chunk(_built(), cand.kernel, cand.rows * cand.unroll)
        assert total < 0.8 * new_total, (cand.label, total, new_total)
        assert ops["LDG"] <= new_ops["LDG"], (cand.label, ops, new_ops)
        assert 4 <= ops["LDS"] <= 4 + 3 / cand.rows, (cand.label, ops)


@pytest.mark.slow  # an NVRTC compile (about 5 s)
@pytest.mark.nvrtc
def test_the_kernels_compile_without_spills_with_the_declared_static_shared_memory():
    onecol_driver.assert_no_spills_and_declared_static_shared(_built(), OC1M.CANDIDATES)
