"""experiments/mmvq_onecol3: iq3_xxs's mul7 decoder on the CPU (tests/onecol3_host.cpp, with mmvq_onecol's driver:
the kernel's own decoder, tables, activation staging and lane walk, bit for bit against one warp per row as
mmvq_old computes it, with planted defects caught), the variants, the launch path and cases, and the kernels: they
compile for sm_90 through the project's NVRTC path without spills, with the static shared memory the launch
declares, and (with cuobjdump) issue fewer instructions a chunk than new's one-column iq3_xxs loop."""
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

OC3 = load_cases_file("experiments/mmvq_onecol3/cases.py")
HERE = Path(__file__).resolve().parent
DECODERS = ("iq3_xxs:mul7", "iq3_xxs:mul7x16")

# (rows, cols, columns, data): 48 chunks (lanes 0-15 two steps); 2 blocks (both word phases of the 98-byte blocks);
# edge blocks (extreme codes and scales); the DRAM shape's K; 448 chunks (14 steps) with 3 columns.
SHAPES = [(40, 1536, 2, "seed:7"), (33, 512, 1, "seed:4"), (512, 2560, 1, "edge:2"),
          (16, 8192, 1, "seed:1"), (5, 14336, 3, "seed:2")]


def _old_and_mul7(decoder, rows, cols, ncols, data, defect="", defines=()):
    """old's y and the host driver's (tests/onecol3_host.cpp: -D `defines`, ONECOL_DEFECT `defect`)."""
    return onecol_driver.old_and_driver(OC3.MmvqOneCol3(), HERE / "onecol3_host.cpp", OC3.KERNELS, decoder,
                                        "iq3_xxs", rows, cols, ncols, data, defect, defines)


@pytest.mark.slow  # host emulation: builds and runs the C++ driver and tests/iq_host's (about 1 s a case)
@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("rows,cols,ncols,data", SHAPES)
def test_mul7_for_iq3_xxs_equals_one_warp_per_row_bitwise(decoder, rows, cols, ncols, data):
    old, mine = _old_and_mul7(decoder, rows, cols, ncols, data)
    assert old.shape == mine.shape == (ncols, rows)
    assert onecol_driver.differing(old, mine) == 0, f"{onecol_driver.differing(old, mine)} of {old.size} outputs differ"


# Planted: the 8th sign (the parity) off its bit; the selector's source bytes of the two words swapped (weights 0-1
# read 4-5's magnitudes); the codes staged in old's order; the spread without copies 2 and 3 (signs 2, 6, 3 lost).
PLANTED = [("", ("ONECOL_MUL7_PARITY_BIT=29",)), ("", ("ONECOL3_SEL_BASE=0x26042604u",)), ("order", ()),
           ("", ("ONECOL_MUL7_SPREAD=0x4081u",))]


@pytest.mark.slow  # host emulation (a -D build about 3 s more)
@pytest.mark.parametrize("defect,defines", PLANTED)
def test_a_planted_defect_changes_most_outputs(defect, defines):
    old, mine = _old_and_mul7("iq3_xxs:mul7", 40, 1536, 1, "seed:7", defect, defines)
    assert onecol_driver.differing(old, mine) > old.size // 2


def test_the_variants_and_cases():
    fam = OC3.MmvqOneCol3()
    assert [v.name for v in fam.variants] == ["old", "new", "onecol3-m", "onecol3-m16", "onecol3-m2"]
    assert OC3.CANDIDATES[0].kernel == "mmvq_onecol<onecol::Iq3xxsMul7<1>, 4, 3, 2>"
    assert [c.static_bytes for c in OC3.CANDIDATES] == [2048, 32768, 2048]
    assert fam.name_expressions(OC3.OWN_SOURCE) == [c.kernel for c in OC3.CANDIDATES]
    cases = fam.default_cases()
    assert {c.fmt for c in cases} == {"iq3_xxs"} and {c.ncols for c in cases} == {1, 11}
    assert {(c.rows, c.cols) for c in cases if c.data == "seed:1"} == {(8192, 2560), (16384, 512), (37, 1280),
                                                                       (3, 256), (1000, 14336)}
    assert any(c.data.startswith("edge") for c in cases) and any(c.data.startswith("fixture") for c in cases)
    assert [(c.fmt, c.rows, c.cols, c.ncols) for c in fam.bench_cases()] == [("iq3_xxs", 131072, 8192, 1)]


@pytest.mark.parametrize("index", range(len(OC3.CANDIDATES)))
def test_a_candidate_runs_its_kernel_for_the_one_column_pass_only(monkeypatch, index):
    """Stub kernels record the launches: an 11-column iq3_xxs case runs new's 8- and 2-column passes, then the
    candidate's kernel; another format runs new's passes only."""
    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma, mmvq_onecol
    from strata_bench.kit import ceil_div
    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, family_mod, mmvq_mma, mmvq_onecol, resident=132)
    cand, fam = OC3.CANDIDATES[index], OC3.MmvqOneCol3()
    for fmt in ("iq3_xxs", "iq2_xxs"):
        kernels = RecordingKernels()
        dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 2560), np.float32),
               "xq": np.zeros((11, 80 * 36), np.uint8)}
        fam.launch(fam.case(fmt, 1000, 2560, 11, "seed:1"), cand.label, kernels, dev,
                   {"y": np.zeros((11, 1000), np.float32)})
        last = cand.kernel if fmt == "iq3_xxs" else family_mod.new_config(fmt, 1).kernel(fmt, 1)
        assert kernels.names == ["quantize_q8_1", family_mod.new_config(fmt, 8).kernel(fmt, 8),
                                 family_mod.new_config(fmt, 2).kernel(fmt, 2), last]
        if fmt == "iq3_xxs":
            _, grid, block, args, shared = kernels.calls[-1]
            assert grid == (min(ceil_div(1000, 8 * cand.rows), 132),) and block == (256,)
            assert shared == 80 * OC3.ACT_BYTES and args[2] == 1000 and args[3] == 80
            assert args[4].shape == (1, 80 * 36) and args[5].shape == (1, 1000)


_built = functools.partial(onecol_driver.compile_experiment, OC3, OC3.MmvqOneCol3)


@pytest.mark.slow  # an NVRTC compile (about 3 s)
@pytest.mark.nvrtc
def test_the_kernels_compile_without_spills_with_the_declared_static_shared_memory():
    onecol_driver.assert_no_spills_and_declared_static_shared(_built(), OC3.CANDIDATES)


@pytest.mark.slow  # an NVRTC compile, then cuobjdump
@pytest.mark.nvrtc
@onecol_driver.needs_cuobjdump
def test_the_mul7_loop_issues_fewer_instructions_a_chunk_than_new_with_no_more_shared_or_global_loads():
    """Per chunk of the unrolled step loop: new's iq3_xxs one-column loop (a sign-mask decoder: 16 dp4a a chunk)
    against m at the same R and MINB (8; m unrolls 2 steps, new 4): fewer instructions, no more LDS or LDG, one POPC a group and no masked dp4a."""
    from strata_bench.kernels.build import compile_source

    def per_chunk(built, kernel, idp, chunks):
        return onecol_driver.loop_per_chunk(built, kernel, idp, chunks, onecol_driver.CUOBJDUMP)

    new_kernel = OC3.Mmvq.new_config("iq3_xxs", 1).kernel("iq3_xxs", 1)
    cfg = OC3.Mmvq.new_config("iq3_xxs", 1)
    new_built = compile_source("mmvq/mmvq.cu", [new_kernel], "sm_90")
    new_ops, new_total = per_chunk(new_built, new_kernel, 16 * cfg.rows * cfg.unroll, cfg.rows * cfg.unroll)
    m = OC3.CANDIDATES[0]
    assert (m.rows, m.min_blocks) == (cfg.rows, cfg.min_blocks)
    m_ops, m_total = per_chunk(_built(), m.kernel, 8 * m.rows * m.unroll, m.rows * m.unroll)
    assert m_total < 0.8 * new_total, (m_total, new_total)
    assert m_ops["LDS"] <= new_ops["LDS"] and m_ops["LDG"] <= new_ops["LDG"], (m_ops, new_ops)
    assert m_ops["POPC"] == 4 and m_ops["IDP"] == 8
