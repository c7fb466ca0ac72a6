"""experiments/mmvq_mma5: the candidates' fragment decoders (the product's since issue 37, kernels_src/mmvq, and
this folder's per-lane controls, kernels/mma_frag5.cuh) through mmvq_mma's schedule on the CPU
(tests/iq_host/mma_emul.h: every lane's words, dw and both scales against the format's full decode, then y bit for
bit against one warp per row; for the split tags the two k16 mmas and their two-scale float), planted defects that
must fail it, the variant table and cases, and the kernels: they compile for sm_90 through the project's NVRTC path
without spills, and (with cuobjdump) the split kernels run m16n8k16, the iq3 ones m16n8k32, and only the pairs
shuffle."""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cases_file import load_cases_file
from tests.families.test_mmvq_mma import SHAPES, _both

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from iq_host import harness  # noqa: E402

MMA5 = load_cases_file("experiments/mmvq_mma5/cases.py")


def _host(tag: str, *defects: str, xor: int = 1):
    """The host build whose dot_mma runs the five formats with the candidates' decoders: iq3_* their own MmaFrag
    (the product's since issue 37), the split formats fmt_<format>_<tag> (k16: per lane, this folder's control;
    k16pair: the lane pair, the product's; partner t ^ xor); `defects` names MMA_DEFECT_* macros planted as 1."""
    tags = tuple(f"MMA_EMUL_{f.upper()}=fmt_{f}_{tag}" for f in MMA5.SPLIT)
    return harness.binary(headers=(str(MMA5.KERNELS / "mma_frag5.cuh"),),
                          defines=(*tags, f"LANEPAIR_XOR={xor}", *(f"MMA_DEFECT_{d}=1" for d in defects)))


def _equal(fmt: str, rows: int, cols: int, ncols: int, data: str, build) -> None:
    old, mma = _both(fmt, rows, cols, ncols, data, build=build)
    assert old.shape == mma.shape == (ncols, rows)
    assert np.array_equal(old.view(np.uint32), mma.view(np.uint32)), \
        f"{int((old.view(np.uint32) != mma.view(np.uint32)).sum())} of {old.size} outputs differ"


@pytest.mark.slow  # host emulation: builds and runs the C++ harness (6 s a build, then a few seconds a case)
@pytest.mark.parametrize("fmt,tag", [*((f, "k16") for f in MMA5.FORMATS), *((f, "k16pair") for f in MMA5.SPLIT)])
@pytest.mark.parametrize("rows,cols,ncols,data", SHAPES)
def test_the_schedule_with_this_folders_decoders_equals_one_warp_per_row_bitwise(fmt, tag, rows, cols, ncols, data):
    """iq3_*: their own MmaFrag in either build (the tag names the split formats' decoder only)."""
    _equal(fmt, rows, -(-cols // 256) * 256, ncols, data, _host(tag))  # whole 256-value blocks: all five


@pytest.mark.slow  # host emulation: a harness build per planted defect (6-7 s each)
@pytest.mark.parametrize("fmt,tag,defect,xor", [
    *((f, "k16", "SIGN_HALF", 1) for f in MMA5.WORDS),       # the sign nibble of the other half
    *((f, "k16", "LS1", 1) for f in MMA5.SPLIT),             # ls1 from ls0's bits
    *((f, "k16pair", "LS1", 1) for f in MMA5.SPLIT),
    *((f, "k16pair", "", xor) for f in MMA5.SPLIT for xor in (2, 3)),  # the exchange with another row half's lane
])
def test_a_planted_defect_fails_the_fragment_check(fmt, tag, defect, xor):
    """dot_mma stops with exit 3 at the first lane whose words or scales differ from decode()'s."""
    with pytest.raises(subprocess.CalledProcessError) as err:
        _both(fmt, 40, 1536, 8, "seed:7", build=_host(tag, *filter(None, [defect]), xor=xor))
    assert err.value.returncode == 3


def test_the_variants_and_their_kernels():
    fam = MMA5.MmvqMma5()
    assert [v.name for v in fam.variants] == ["old", "new", "lane-tg4", "pair-tg4", "pair-tg3", "new-dp4a"]
    lane, pair, pair3 = MMA5.CONFIGS
    assert [lane.kernel(f) for f in MMA5.FORMATS] == [
        "mmvq_mma<siq::fmt_iq1_m_k16, 4, 1, 1>", "mmvq_mma<siq::fmt_iq2_xs_k16, 4, 1, 1>",
        "mmvq_mma<siq::fmt_iq2_s_k16, 4, 1, 1>", "mmvq_mma<siq::fmt_iq3_xxs, 4, 1, 1>",
        "mmvq_mma<siq::fmt_iq3_s, 4, 1, 1>"]
    assert pair.formats == pair3.formats == MMA5.SPLIT
    assert pair3.kernel("iq2_s") == "mmvq_mma<siq::fmt_iq2_s_k16pair, 3, 1, 1>"
    assert fam.name_expressions(MMA5.OWN_SOURCE) == [c.kernel(f) for c in MMA5.CONFIGS for f in c.formats]
    # MmaConfig's launch: 128 threads a tile group; the 8 columns' activations, 16 rows x 112 bytes a warp (iq2_xs:
    # 74-byte blocks, 6 granules a row at any head, 7 for the banks), the tree; the 512-word table and K0, K1
    assert lane.threads == 512 and pair3.threads == 384
    assert lane.shared_bytes("iq2_xs", 256) == (256 * 288 + 16 * 16 * 112 + 4 * 12288, 512 * 4 + 8)


def test_which_passes_a_candidate_runs(monkeypatch):
    monkeypatch.setattr(MMA5, "compute_major", lambda: 9)
    monkeypatch.setattr(MMA5, "shared_optin", lambda: 227 * 1024)
    lane, pair, _ = MMA5.CONFIGS
    assert all(MMA5.applies(lane, f, 8, 256) for f in MMA5.FORMATS)
    assert MMA5.applies(pair, "iq1_m", 8, 256) and not MMA5.applies(pair, "iq3_s", 8, 256)
    assert not MMA5.applies(lane, "iq2_xs", 4, 256) and not MMA5.applies(lane, "iq1_s", 8, 256)
    assert not MMA5.applies(lane, "iq3_xxs", 8, 1024)  # 32768 inputs: the activations alone are 288 KiB
    monkeypatch.setattr(MMA5, "compute_major", lambda: 7)
    assert not MMA5.applies(lane, "iq2_xs", 8, 256)


@pytest.mark.parametrize("fmt,winner", [("iq1_m", "fmt_iq1_m_k16pair"), ("iq3_s", "fmt_iq3_s")])
def test_new_dp4a_is_news_launch_before_issue_37(monkeypatch, fmt, winner):
    """The bench's baseline beside the candidates: every pass on mmvq_new's kernel as new_config says, where `new`
    now runs the winner's kernel (pair-tg4's, lane-tg4's for iq3_*) for the tall 8-column pass."""
    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma
    from tests.stub_kernels import mmvq_launches, stub_launch_helpers

    stub_launch_helpers(monkeypatch, MMA5, family_mod, mmvq_mma)
    fam = MMA5.MmvqMma5()
    launched = mmvq_launches(fam, fam.case(fmt, 32768, 8192, 8, "seed:1"), ("new", "new-dp4a"))
    assert launched == {"new": ["quantize_q8_1", f"mmvq_mma<siq::{winner}, 4, 1, 1>"],
                        "new-dp4a": ["quantize_q8_1", family_mod.new_config(fmt, 8).kernel(fmt, 8)]}
    # its kernels are new's own mmvq_new instances: nothing more to compile
    dp4a = MMA5.DP4A.kernels(fam, "mmvq/mmvq.cu")
    assert len(dp4a) == 4 * len(MMA5.FORMATS) and set(dp4a) <= set(fam.variant("new").kernels(fam, "mmvq/mmvq.cu"))


def test_the_bounds_that_choose_each_split_formats_float_hold_for_the_grids():
    """mma_frag_split.cuh's MAX_ISUM = 32 x max |w| x 127 x max ls: iq1_m's (|8g +- 1| <= 9, g in {-1, 0, 1}; ls <= 15)
    is under 2^22, so its magic-bias float is exact; iq2_*'s (43, the largest grid byte; ls <= 31) is not, and an
    all-43 grid entry exists, so the bound is reached in principle and those formats convert by I2F."""
    from gguf import quants

    from strata_bench.kernels.tables import _grid_values

    header = (ROOT / "kernels_src/mmvq/mma_frag_split.cuh").read_text(encoding="utf-8")
    bounds = [tuple(map(int, m)) for m in re.findall(r"MAX_ISUM = 32 \* (\d+) \* 127 \* (\d+);", header)]
    assert bounds == [(43, 31), (9, 15)]  # Iq2Scales (iq2_xs, iq2_s), then iq1_m
    for cls in (quants.IQ2_XS, quants.IQ2_S):
        grid = np.asarray(_grid_values(cls)).reshape(-1, 8).astype(int)
        assert grid.max() == 43 and (grid == 43).all(axis=1).any()
    assert np.abs(np.asarray(_grid_values(quants.IQ1_M)).astype(int)).max() == 1  # w = 8g +- 1: |w| <= 9
    assert 32 * 9 * 127 * 15 < 2**22 <= 32 * 43 * 127 * 31


def _calls(monkeypatch, fmt: str, variant: str) -> list:
    """The launches of `variant` on an 11-column case of 1000 x 1536 (63 tiles) without a GPU: stub kernels that
    record them, an H200's limits."""
    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma
    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, MMA5, family_mod, mmvq_mma)
    kernels, fam = RecordingKernels(), MMA5.MmvqMma5()
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 1536), np.float32), "xq": np.zeros((11, 48 * 36), np.uint8)}
    fam.launch(fam.case(fmt, 1000, 1536, 11, "seed:1"), variant, kernels, dev, {"y": np.zeros((11, 1000), np.float32)})
    return kernels.calls


@pytest.mark.parametrize("config,fmt", [(0, "iq3_xxs"), (0, "iq2_xs"), (2, "iq1_m"), (1, "iq3_s")])
def test_a_candidate_launches_its_kernel_for_the_8_column_pass_and_new_for_the_rest(monkeypatch, config, fmt):
    """Columns 0-7 on the candidate's mmvq_mma where it has the format (TG tile groups a block: 16 or 21 blocks
    for 63 tiles), else new's 8-column pass; then new's 2- and 1-column passes."""
    from strata_bench.families import mmvq as family_mod

    cfg = MMA5.CONFIGS[config]
    calls = _calls(monkeypatch, fmt, cfg.label)
    mine = fmt in cfg.formats
    first = cfg.kernel(fmt) if mine else family_mod.new_config(fmt, 8).kernel(fmt, 8)
    assert [c[0] for c in calls] == ["quantize_q8_1", first, *(family_mod.new_config(fmt, n).kernel(fmt, n) for n in (2, 1))]
    if mine:
        _, grid, block, args, shared = calls[1]
        assert (grid, block, shared) == ((-(-63 // cfg.tile_groups),), (cfg.threads,), cfg.shared_bytes(fmt, 48)[0])
        assert (args[2], args[3], args[4].shape, args[5].shape) == (1000, 48, (8, 48 * 36), (8, 1000))


def test_the_cases():
    fam = MMA5.MmvqMma5()
    bench = [(c.fmt, c.rows, c.cols, c.ncols) for c in fam.bench_cases()]
    assert bench == [(f, rows, 8192, 8) for rows in (131072, 32768) for f in MMA5.FORMATS]
    cases = fam.default_cases()
    assert {(c.fmt, c.ncols) for c in cases} == {(f, n) for f in MMA5.FORMATS for n in (8, 11)}
    assert {(c.rows, c.cols) for c in cases if c.data == "seed:1"} == {
        (8192, 2560), (16384, 512), *MMA5.PARITY_SHAPES}
    kinds = {c.data.split(":")[0] for c in cases}
    assert {"edge", "fixture"} <= kinds


@functools.lru_cache(maxsize=None)
def _built(arch: str):
    """Every candidate kernel, one NVRTC build of kernels/mmvq_mma5.cu."""
    from strata_bench.kernels.build import compile_source

    names = MMA5.MmvqMma5().name_expressions(MMA5.OWN_SOURCE)
    return compile_source(MMA5.OWN_SOURCE, names, arch, root=MMA5.KERNELS)


@pytest.mark.slow  # an NVRTC compile
@pytest.mark.nvrtc
def test_the_kernels_compile_without_spills():
    log = _built("sm_90").log
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert len(spills) >= 11, log  # 5 lane, 3 pair at TG 4 and 3
    assert set(spills) == {("0", "0")}, log


CUOBJDUMP = shutil.which(os.environ.get("CUOBJDUMP", "cuobjdump"))


@pytest.mark.slow  # an NVRTC compile, then cuobjdump
@pytest.mark.nvrtc
@pytest.mark.skipif(CUOBJDUMP is None, reason="no cuobjdump (set CUOBJDUMP=path): the SASS is not read")
def test_the_split_kernels_run_two_mmas_a_chunk_and_only_the_pairs_shuffle():
    """The innermost loop with mmas is one whole 8-chunk group: 8 IMMA (m16n8k32) for iq3_*, 16 (two m16n8k16 a
    chunk) for the split tags; SHFL in the pairs' loops only (two a chunk: one a row)."""
    from strata_bench.kernels.sass import dump_sass, loops, parse_functions

    built = _built("sm_90")
    functions = parse_functions(dump_sass(built.cubin, CUOBJDUMP))
    for config in MMA5.CONFIGS:
        for fmt in config.formats:
            inner = next(lp for lp in loops(functions[built.lowered[config.kernel(fmt)]]) if lp.counts["IMMA"])
            pair = config.frag == "pair"
            want = (8, 0) if fmt in MMA5.WORDS else (16, 16 if pair else 0)
            assert (inner.counts["IMMA"], inner.counts["SHFL"]) == want, (config.label, fmt)
