"""experiments/mmvq_lanepair: the lane-pair decoder (the product's since issue 37, kernels_src/mmvq/mma_frag.cuh)
and this folder's control (kernels/mma_frag_lane.cuh) through mmvq_mma's schedule on the CPU (tests/iq_host/
mma_emul.h: every lane's words against iq1_s's full decode, then y bit for bit against one warp per row), a wrong
partner lane caught, the variant table and cases, and the kernels: they compile for sm_90
through the project's NVRTC path without spills, and (with cuobjdump) the pair's loop exchanges by SHFL and the
control's does not."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.cases_file import load_cases_file
from tests.families.test_mmvq_mma import SHAPES, _both, _whole_blocks

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from iq_host import harness  # noqa: E402

PAIR = load_cases_file("experiments/mmvq_lanepair/cases.py")


def _host(tag: str, xor: int = 1):
    """The host build whose dot_mma runs iq1_s and iq2_xxs with the decoders `tag` (pair: the product's,
    kernels_src/mmvq/mma_frag.cuh; lane: the controls, kernels/mma_frag_lane.cuh), the partner lane t ^ xor."""
    return harness.binary(headers=(str(PAIR.KERNELS / "mma_frag_lane.cuh"),),
                          defines=(f"MMA_EMUL_IQ1_S=fmt_iq1_s_{tag}", f"MMA_EMUL_IQ2_XXS=fmt_iq2_xxs_{tag}",
                                   f"LANEPAIR_XOR={xor}"))


@pytest.mark.slow  # host emulation: builds and runs the C++ harness (3-6 s for each build)
@pytest.mark.parametrize("fmt", PAIR.FORMATS)
@pytest.mark.parametrize("tag", ["pair", "lane"])
@pytest.mark.parametrize("rows,cols,ncols,data", SHAPES)
def test_the_schedule_with_the_lane_pair_decoder_equals_one_warp_per_row_bitwise(fmt, tag, rows, cols, ncols, data):
    cols = _whole_blocks(fmt, cols)
    old, mma = _both(fmt, rows, cols, ncols, data, build=_host(tag))
    assert old.shape == mma.shape == (ncols, rows)
    assert np.array_equal(old.view(np.uint32), mma.view(np.uint32)), \
        f"{int((old.view(np.uint32) != mma.view(np.uint32)).sum())} of {old.size} outputs differ"


@pytest.mark.slow  # host emulation: a harness build per partner lane (6-7 s each)
@pytest.mark.parametrize("fmt", PAIR.FORMATS)
@pytest.mark.parametrize("xor", [2, 3])
def test_a_wrong_partner_lane_fails_the_fragment_check(fmt, xor):
    """The exchange with lane t ^ 2 or t ^ 3 (another row half or the wrong group) gives words decode() does not:
    dot_mma stops with exit 3 at the first lane whose fragment differs."""
    with pytest.raises(subprocess.CalledProcessError) as err:
        _both(fmt, 40, 1536, 8, "seed:7", build=_host("pair", xor))
    assert err.value.returncode == 3


def test_the_variants_and_their_kernels():
    fam = PAIR.MmvqLanepair()
    assert [v.name for v in fam.variants] == ["old", "new", "pair-tg4", "pair-tg3", "lane-tg4", "new-dp4a"]
    assert [c.kernel("iq1_s") for c in PAIR.CONFIGS] == [
        "mmvq_mma<siq::fmt_iq1_s_pair, 4, 1, 1>", "mmvq_mma<siq::fmt_iq1_s_pair, 3, 1, 1>",
        "mmvq_mma<siq::fmt_iq1_s_lane, 4, 1, 1>"]
    assert PAIR.FORMATS == ("iq1_s", "iq2_xxs")
    assert fam.name_expressions(PAIR.OWN_SOURCE) == [c.kernel(f) for c in PAIR.CONFIGS for f in PAIR.FORMATS]
    assert PAIR.CONFIGS[0].kernel("iq2_xxs") == "mmvq_mma<siq::fmt_iq2_xxs_pair, 4, 1, 1>"
    # MmaConfig's launch: 128 threads a tile group; the 8 columns' activations, 16 rows x 80 bytes a warp, the tree
    assert PAIR.CONFIGS[0].threads == 512 and PAIR.CONFIGS[1].threads == 384
    assert PAIR.CONFIGS[0].shared_bytes("iq1_s", 256) == (256 * 288 + 16 * 16 * 80 + 4 * 12288, 8200)


def test_which_passes_a_candidate_runs(monkeypatch):
    monkeypatch.setattr(PAIR, "compute_major", lambda: 9)
    monkeypatch.setattr(PAIR, "shared_optin", lambda: 227 * 1024)
    pair = PAIR.CONFIGS[0]
    assert PAIR.applies(pair, "iq1_s", 8, 256) and PAIR.applies(pair, "iq2_xxs", 8, 256)
    assert not PAIR.applies(pair, "iq1_s", 4, 256) and not PAIR.applies(pair, "iq3_xxs", 8, 256)
    assert not PAIR.applies(pair, "iq1_s", 8, 1024)  # 32768 inputs: the activations alone are 288 KiB
    monkeypatch.setattr(PAIR, "compute_major", lambda: 7)
    assert not PAIR.applies(pair, "iq1_s", 8, 256)


@pytest.mark.parametrize("index,name,threads,grid", [(0, "mmvq_mma<siq::fmt_iq1_s_pair, 4, 1, 1>", 512, 16),
                                                     (1, "mmvq_mma<siq::fmt_iq1_s_pair, 3, 1, 1>", 384, 21),
                                                     (2, "mmvq_mma<siq::fmt_iq1_s_lane, 4, 1, 1>", 512, 16)])
def test_a_candidate_launches_its_kernel_for_the_8_column_pass_and_new_for_the_rest(monkeypatch, index, name,
                                                                                    threads, grid):
    """The launch path without a GPU (stub kernels that record their launches, an H200's limits): an 11-column
    case of 1000 x 1536 (63 tiles) runs the candidate for columns 0-7, then new's 2- and 1-column passes."""
    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma
    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, PAIR, family_mod, mmvq_mma)
    kernels = RecordingKernels()
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 1536), np.float32), "xq": np.zeros((11, 48 * 36), np.uint8)}
    outs = {"y": np.zeros((11, 1000), np.float32)}
    fam = PAIR.MmvqLanepair()
    fam.launch(fam.case("iq1_s", 1000, 1536, 11, "seed:1"), PAIR.VARIANTS[index].name, kernels, dev, outs)
    names = [c[0] for c in kernels.calls]
    assert names == ["quantize_q8_1", name, family_mod.new_config("iq1_s", 2).kernel("iq1_s", 2),
                     family_mod.new_config("iq1_s", 1).kernel("iq1_s", 1)]
    _, grid_, block, args, shared = kernels.calls[1]
    assert grid_ == (grid,) and block == (threads,)  # 63 tiles, TG a block
    assert shared == PAIR.CONFIGS[index].shared_bytes("iq1_s", 48)[0]
    assert args[2] == 1000 and args[3] == 48 and args[4].shape == (8, 48 * 36) and args[5].shape == (8, 1000)


def test_new_dp4a_is_news_launch_before_issue_37(monkeypatch):
    """The bench's baseline beside the pair: every pass on mmvq_new's kernel as new_config says (r4m2f for the
    8-column pass), where `new` now runs pair-tg4's kernel for the tall 8-column pass."""
    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma
    from tests.stub_kernels import mmvq_launches, stub_launch_helpers

    stub_launch_helpers(monkeypatch, PAIR, family_mod, mmvq_mma)
    fam = PAIR.MmvqLanepair()
    launched = mmvq_launches(fam, fam.case("iq1_s", 131072, 8192, 8, "seed:1"), ("new", "new-dp4a"))
    assert launched == {"new": ["quantize_q8_1", "mmvq_mma<siq::fmt_iq1_s_pair, 4, 1, 1>"],
                        "new-dp4a": ["quantize_q8_1", "mmvq_new<siq::fmt_iq1_s, 8, 4, 2, 0, true>"]}
    # its kernels are new's own mmvq_new instances: nothing more to compile
    dp4a = PAIR.DP4A.kernels(fam, "mmvq/mmvq.cu")
    assert len(dp4a) == 4 * len(PAIR.FORMATS) and set(dp4a) <= set(fam.variant("new").kernels(fam, "mmvq/mmvq.cu"))


def test_the_cases():
    fam = PAIR.MmvqLanepair()
    cases = fam.default_cases()
    assert {c.fmt for c in cases} == {"iq1_s", "iq2_xxs"} and {c.ncols for c in cases} == {8, 11}
    shapes = {(c.rows, c.cols) for c in cases if c.data == "seed:1"}
    assert shapes == {(8192, 2560), (16384, 512), (37, 2304), (24, 4352), (1000, 8192)}
    assert any(c.data.startswith("edge") for c in cases) and any(c.data.startswith("fixture") for c in cases)
    assert [(c.fmt, c.rows, c.cols, c.ncols) for c in fam.bench_cases()] == [("iq1_s", 131072, 8192, 8),
                                                                              ("iq2_xxs", 131072, 8192, 8)]


@functools.lru_cache(maxsize=None)
def _built(arch: str):
    from strata_bench.kernels.build import compile_source

    return compile_source(PAIR.OWN_SOURCE, PAIR.MmvqLanepair().name_expressions(PAIR.OWN_SOURCE), arch,
                          root=PAIR.KERNELS)


@pytest.mark.slow  # an NVRTC compile
@pytest.mark.nvrtc
def test_the_kernels_compile_without_spills():
    built = _built("sm_90")
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", built.log)
    assert len(spills) >= len(PAIR.CONFIGS) * len(PAIR.FORMATS) and all(s == ("0", "0") for s in spills), built.log


CUOBJDUMP = shutil.which(os.environ.get("CUOBJDUMP", "cuobjdump"))


@pytest.mark.slow  # an NVRTC compile, then cuobjdump
@pytest.mark.nvrtc
@pytest.mark.skipif(CUOBJDUMP is None, reason="no cuobjdump (set CUOBJDUMP=path): the SASS is not read")
def test_the_pair_exchanges_by_shuffle_and_the_control_does_not():
    built = _built("sm_90")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(built.cubin)
        f.flush()
        sass = subprocess.run([CUOBJDUMP, "--dump-sass", f.name], capture_output=True, text=True, check=True).stdout
    shfl = {fn.split()[0]: fn.count("SHFL.BFLY") for fn in re.split(r"Function : ", sass)[1:]}
    for fmt in PAIR.FORMATS:
        counts = {c.frag + str(c.tile_groups): shfl[built.lowered[c.kernel(fmt)]] for c in PAIR.CONFIGS}
        assert counts["pair4"] > 0 and counts["pair3"] > 0 and counts["lane4"] == 0, (fmt, counts)
