"""experiments/mmvq_mma/cases.py, the --cases file of mmvq_mma: its variant table, which passes the mma variant
runs, and its cases (test_mmvq_mma_kernels.py beside this file compiles the kernels it names)."""
from __future__ import annotations

import pytest

from tests.cases_file import load_cases_file
from tests.stub_kernels import A100_SHARED_OPTIN, H200_SHARED_OPTIN


@pytest.fixture(scope="module")
def script():
    return load_cases_file("experiments/mmvq_mma/cases.py")


MMA_NAMES = ["mma", "mma_s2"]


def test_family_has_old_new_and_the_mma_variants_and_compiles_mma_from_its_own_source(script):
    fam = script.MmvqMma()
    assert [v.name for v in fam.variants] == ["old", "new", *MMA_NAMES]
    assert fam.sources == ("q8_1/q8_1.cu", "mmvq/mmvq.cu", "mmvq/mmvq_mma.cu", "mmvq/mmvq_onecol.cu", "mmvq_mma_exp.cu")
    assert fam.kernels_root == script.KERNELS and (script.KERNELS / "mmvq_mma_exp.cu").is_file()
    # new's (the built-in tall passes) from the built-in source, as the built-in family compiles them
    assert fam.name_expressions("mmvq/mmvq_mma.cu") == [f"mmvq_mma<siq::fmt_{f}, 4, 1, 1>" for f in ("iq4_nl", "iq4_xs")] + \
        ["mmvq_mma<siq::fmt_q8_0, 3, 1, 1>", "mmvq_mma<siq::fmt_iq1_s_pair, 4, 1, 1>",
         "mmvq_mma<siq::fmt_iq2_xxs_pair, 4, 1, 1>", "mmvq_mma<siq::fmt_iq1_m_k16pair, 4, 1, 1>",
         "mmvq_mma<siq::fmt_iq2_xs_k16pair, 4, 1, 1>", "mmvq_mma<siq::fmt_iq2_s_k16pair, 4, 1, 1>",
         "mmvq_mma<siq::fmt_iq3_xxs, 4, 1, 1>", "mmvq_mma<siq::fmt_iq3_s, 4, 1, 1>"]
    # mma's, then mma_s2's, less the built-in ones (a launch gets those from the built-in source)
    assert fam.name_expressions("mmvq_mma_exp.cu") == [
        "mmvq_mma<siq::fmt_iq2_xxs, 4, 1, 1>", "mmvq_mma<siq::fmt_iq1_s, 4, 1, 1>",
        "mmvq_mma<siq::fmt_iq4_nl, 4, 1, 2>", "mmvq_mma<siq::fmt_q8_0, 3, 1, 2>"]
    assert not any("mma" in e for e in fam.name_expressions("mmvq/mmvq.cu"))


def test_every_mma_variant_fits_shared_memory_at_the_dram_shape_and_keeps_the_baseline(script):
    """Each variant's (TG, S) for its formats fits 227 KiB at K = 8192; the baseline (S = 1) is main's
    launch, byte for byte the same shared memory; a format a variant lacks runs new's kernel."""
    for p in script.MMA_PASSES:
        assert all(p.applies(fmt, 8, 256, H200_SHARED_OPTIN) for fmt in p.formats), p.name
    base = script.MMA_PASS
    assert base.name == "mma" and base.weight_stages("iq4_nl") == base.weight_stages("q8_0") == 1
    s2 = dict((p.name, p) for p in script.MMA_PASSES)["mma_s2"]
    assert not s2.applies("iq4_xs", 8, 256, H200_SHARED_OPTIN)  # the cp.async reference runs iq4_nl and q8_0 only
    dynamic, _ = s2.shared_bytes("iq4_nl", 256)
    assert dynamic == 8 * 256 * 36 + 4 * (2 * 4 * 16 * 8 * 18 + 3 * 32 * 32 * 4)


def test_the_super_block_formats_fit_at_4_tile_groups(script):
    """Their group rows (families/mmvq_mma.group_row_bytes, tested with that module) fit K = 8192 and 14336."""
    p = script.MMA_PASS
    for fmt in script.SUPER_FORMATS:
        assert p.applies(fmt, 8, 256, H200_SHARED_OPTIN) and p.applies(fmt, 8, 448, H200_SHARED_OPTIN) and p.tile_groups(fmt) == 4
    assert p.shared_bytes("iq2_xxs", 256)[0] == 8 * 256 * 36 + 4 * (4 * 16 * 80 + 3 * 32 * 32 * 4)


def test_mma_runs_only_8_column_passes_of_its_formats_that_fit_in_shared_memory(script):
    p = script.MMA_PASS
    assert p.applies("iq4_nl", 8, 256, H200_SHARED_OPTIN) and p.applies("q8_0", 8, 256, H200_SHARED_OPTIN) and p.applies("iq4_nl", 8, 448, H200_SHARED_OPTIN)
    assert not p.applies("iq4_nl", 4, 256, H200_SHARED_OPTIN) and not p.applies("iq2_xs", 8, 256, H200_SHARED_OPTIN)
    assert not p.applies("iq4_nl", 8, 4096, H200_SHARED_OPTIN)  # K = 131072: 8 columns' activations alone exceed 227 KiB
    assert not p.applies("iq4_nl", 8, 448, A100_SHARED_OPTIN)  # K = 14336 needs 215064 bytes: over sm_80's opt-in
    dynamic, static = p.shared_bytes("iq4_nl", 256)
    assert dynamic == 8 * 256 * 36 + 4 * (4 * 16 * 8 * 18 + 3 * 32 * 32 * 4) and static == 6 * 4
    assert dynamic + static <= 160 * 1024  # one block of 16 warps per SM at the DRAM shape
    assert p.threads("iq4_nl") == 512 and p.threads("q8_0") == 384


def test_cases_cover_part_tiles_short_k_edge_data_and_the_dram_shape(script):
    fam = script.MmvqMma()
    cases = list(fam.default_cases())
    assert {c.fmt for c in cases} == {"iq4_nl", "q8_0", "iq4_xs", "iq2_xxs", "iq1_s"} and {c.ncols for c in cases} == {8, 11}
    assert {(c.rows, c.cols) for c in cases} >= {(1000, 1536), (24, 544), (24, 4352), (8192, 2560), (16384, 512)}
    assert all(c.cols % 256 == 0 for c in cases if c.fmt in script.SUPER_FORMATS)
    assert any(c.data.startswith("edge") for c in cases) and all(c.variants == ("old", "new", *MMA_NAMES) for c in cases)
    bench = list(fam.bench_cases())
    assert {(c.fmt, c.rows, c.cols, c.ncols) for c in bench} >= {("iq4_nl", 131072, 8192, 8), ("q8_0", 131072, 8192, 8),
                                                                 ("iq4_nl", 32768, 8192, 8), ("q8_0", 4096, 14336, 8),
                                                                 ("iq4_xs", 131072, 8192, 8), ("iq4_xs", 32768, 8192, 8),
                                                                 ("iq2_xxs", 131072, 8192, 8), ("iq1_s", 131072, 8192, 8)}


def _record_launches(script, monkeypatch):
    """Stub kernels that record their launches (name, grid, block, args, shared), and the inputs of an
    11-column case of 1000 x 1536 iq4_nl or q8_0 (63 tiles)."""
    import numpy as np

    from strata_bench.families import mmvq as family_mod
    from strata_bench.families import mmvq_mma
    from tests.stub_kernels import RecordingKernels, stub_launch_helpers

    stub_launch_helpers(monkeypatch, script, family_mod, mmvq_mma)
    kernels = RecordingKernels()
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 1536), np.float32), "xq": np.zeros((11, 48 * 36), np.uint8)}
    outs = {"y": np.zeros((11, 1000), np.float32)}
    return kernels.calls, kernels, dev, outs


def test_mma_variant_launches_mmvq_mma_for_the_8_column_pass_and_new_for_the_rest(script, monkeypatch):
    """The launch path without a GPU."""
    from strata_bench.families import mmvq as family_mod

    calls, kernels, dev, outs = _record_launches(script, monkeypatch)
    fam = script.MmvqMma()
    case = fam.case("iq4_nl", 1000, 1536, 11, "seed:1")
    fam.launch(case, "mma", kernels, dev, outs)
    names = [c[0] for c in calls]
    assert names[0] == "quantize_q8_1" and names[1] == "mmvq_mma<siq::fmt_iq4_nl, 4, 1, 1>"
    assert names[2:] == [family_mod.new_config("iq4_nl", 2).kernel("iq4_nl", 2),
                         family_mod.new_config("iq4_nl", 1).kernel("iq4_nl", 1)]
    _, grid, block, args, shared = calls[1]
    assert grid == (16,) and block == (512,)  # 63 tiles, 4 per block
    assert shared == script.MMA_PASS.shared_bytes("iq4_nl", 48)[0]
    assert args[2] == 1000 and args[3] == 48 and args[4].shape == (8, 48 * 36) and args[5].shape == (8, 1000)
    assert args[6] == 1000


def test_a_staged_variant_launches_its_own_tg_and_s_and_new_for_a_format_it_lacks(script, monkeypatch):
    from strata_bench.families import mmvq as family_mod

    calls, kernels, dev, outs = _record_launches(script, monkeypatch)
    fam = script.MmvqMma()
    fam.launch(fam.case("iq4_nl", 1000, 1536, 11, "seed:1"), "mma_s2", kernels, dev, outs)
    _, grid, block, _, shared = calls[1]
    assert calls[1][0] == "mmvq_mma<siq::fmt_iq4_nl, 4, 1, 2>" and grid == (16,) and block == (512,)  # 4 tiles a block
    assert shared == 8 * 48 * 36 + 4 * (2 * 4 * 16 * 8 * 18 + 3 * 32 * 32 * 4)
    calls.clear()
    fam.launch(fam.case("iq4_xs", 1000, 1536, 11, "seed:1"), "mma_s2", kernels, dev, outs)
    assert calls[1][0] == family_mod.new_config("iq4_xs", 8).kernel("iq4_xs", 8)  # mma_s2 has no iq4_xs launch


def test_mma_launches_a_super_block_format_with_its_granule_rows(script, monkeypatch):
    calls, kernels, dev, outs = _record_launches(script, monkeypatch)
    fam = script.MmvqMma()
    fam.launch(fam.case("iq2_xxs", 1000, 1536, 11, "seed:1"), "mma", kernels, dev, outs)
    _, grid, block, args, shared = calls[1]
    assert calls[1][0] == "mmvq_mma<siq::fmt_iq2_xxs, 4, 1, 1>" and grid == (16,) and block == (512,)
    assert shared == 8 * 48 * 36 + 4 * (4 * 16 * 80 + 3 * 32 * 32 * 4)
    assert args[1] == 400 and args[3] == 48  # row stride: 6 blocks of 66 bytes rounded up to 16; 48 chunks
