"""strata_bench/families/mmvq_mma.py: which 8-column passes of mmvq's `new` run mmvq_mma, with what launch,
and the launch routing of the built-in family (stub kernels, no GPU)."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.families import mmvq as mmvq_mod
from strata_bench.families import mmvq_mma, mmvq_onecol
from strata_bench.families.mmvq import Mmvq, new_config
from tests.stub_kernels import A100_SHARED_OPTIN, H200_SHARED_OPTIN, RecordingKernels, stub_launch_helpers

H200 = lambda: H200_SHARED_OPTIN


def test_only_tall_8_column_passes_of_the_listed_formats_run_mmvq_mma():
    assert mmvq_mma.mma_config("iq4_nl", 8, 32768, 256, lambda: 9, H200) == mmvq_mma.MmaConfig(4, 32768)
    assert mmvq_mma.mma_config("iq4_nl", 8, 131072, 256, lambda: 9, H200) is not None
    assert mmvq_mma.mma_config("iq4_nl", 8, 32767, 256, lambda: 9, H200) is None  # below min_rows: new's kernel is faster
    assert mmvq_mma.mma_config("iq4_nl", 8, 4096, 448, lambda: 9, H200) is None
    assert mmvq_mma.mma_config("q8_0", 8, 131072, 256, lambda: 9, H200) == mmvq_mma.MmaConfig(3, 131072)
    assert mmvq_mma.mma_config("q8_0", 8, 32768, 256, lambda: 9, H200) is None
    assert mmvq_mma.mma_config("iq4_nl", 4, 131072, 256, lambda: 9, H200) is None
    assert mmvq_mma.mma_config("q2_0", 8, 131072, 256, lambda: 9, H200) is None
    assert mmvq_mma.mma_config("iq4_nl", 8, 131072, 4096, lambda: 9, H200) is None  # K = 131072: the activations alone exceed 227 KiB
    assert mmvq_mma.mma_config("iq4_xs", 8, 32768, 256, lambda: 9, H200) == mmvq_mma.MmaConfig(4, 32768)
    assert mmvq_mma.mma_config("iq4_xs", 8, 4096, 256, lambda: 9, H200) is None
    assert mmvq_mma.mma_config("iq4_nl", 8, 131072, 256, lambda: 7, H200) is None  # sm_75: no int8 m16n8k32
    assert mmvq_mma.mma_config("iq4_nl", 8, 131072, 256, lambda: 8, H200) is not None


@pytest.mark.parametrize("fmt,table", [("iq1_s", 8200), ("iq2_xxs", 1032)])
def test_the_lane_pair_runs_only_where_it_was_measured(fmt, table):
    """131072 x 8192 at 8 columns (H200: iq1_s 235.1 us against mmvq_new's 284.3, iq2_xxs 268.5 against 304.3):
    8-column passes of at least 131072 rows; every shorter shape and every other width keeps mmvq_new's kernel."""
    pair = mmvq_mma.MmaConfig(4, 131072, frag="pair")
    assert mmvq_mma.mma_config(fmt, 8, 131072, 256, lambda: 9, H200) == pair
    assert pair.kernel(fmt) == f"mmvq_mma<siq::fmt_{fmt}_pair, 4, 1, 1>" and pair.threads == 512
    assert mmvq_mma.mma_config(fmt, 8, 131071, 256, lambda: 9, H200) is None
    assert mmvq_mma.mma_config(fmt, 8, 4096, 448, lambda: 9, H200) is None  # the bench's built-in shape
    assert all(mmvq_mma.mma_config(fmt, nc, 131072, 256, lambda: 9, H200) is None for nc in (1, 2, 4))
    # the frag names the format tag only: the default decoder keeps the built-in kernels' names
    assert mmvq_mma.MmaConfig(4, 32768).kernel(fmt) == f"mmvq_mma<siq::fmt_{fmt}, 4, 1, 1>"
    # 131072 x 8192: 8 x 256 x 36 activations, 16 warps x 16 rows x 80 bytes, 4 trees; the table (iq1_s 2048
    # words, iq2_xxs 256) and its two constants
    assert pair.shared_bytes(fmt, 256) == (73728 + 20480 + 49152, table)


# 8 x 256 x 36 activations, 16 warps x 16 rows x the group row (iq1_m's 56-byte blocks 5 granules, iq2_xs's 74 and
# iq2_s's 82 7, iq3_xxs's 98 7, iq3_s's 110 9: odd counts covering 8 chunks at any head), 4 trees; the table and
# its two constants (iq1_m 2048 words, iq2_xs 512, iq2_s 1024, iq3_xxs 256, iq3_s 512)
MMA5 = [("iq1_m", "k16pair", 80, 8200), ("iq2_xs", "k16pair", 112, 2056), ("iq2_s", "k16pair", 112, 4104),
        ("iq3_xxs", "", 112, 1032), ("iq3_s", "", 144, 2056)]


@pytest.mark.parametrize("fmt,frag,row,table", MMA5)
def test_the_other_1_to_3_bit_formats_run_mmvq_mma_from_32768_rows(fmt, frag, row, table):
    """H100, 8 columns: each faster than mmvq_new at 131072 x 8192 and at 32768 x 8192 (iq1_m 273.6 and 77.4 us
    against 318.9 and 91.4 ...; mmvq_mma.py's comment), so 8-column passes of at least 32768 rows run it: the split
    formats (a scale per 16 values) with the lane pair's two m16n8k16 mmas a chunk, iq3_* per lane."""
    config = mmvq_mma.MmaConfig(4, 32768, frag=frag)
    assert mmvq_mma.mma_config(fmt, 8, 32768, 256, lambda: 9, H200) == config
    assert mmvq_mma.mma_config(fmt, 8, 131072, 256, lambda: 9, H200) == config
    tag = f"{fmt}_{frag}" if frag else fmt
    assert config.kernel(fmt) == f"mmvq_mma<siq::fmt_{tag}, 4, 1, 1>" and config.threads == 512
    assert mmvq_mma.mma_config(fmt, 8, 32767, 256, lambda: 9, H200) is None
    assert mmvq_mma.mma_config(fmt, 8, 4096, 448, lambda: 9, H200) is None  # the bench's built-in shape
    assert all(mmvq_mma.mma_config(fmt, nc, 131072, 256, lambda: 9, H200) is None for nc in (1, 2, 4))
    assert mmvq_mma.mma_config(fmt, 8, 131072, 256, lambda: 7, H200) is None  # sm_75: no int8 mma
    assert config.shared_bytes(fmt, 256) == (73728 + 16 * 16 * row + 49152, table)


def test_q2_0_keeps_mmvq_new():
    assert mmvq_mma.mma_config("q2_0", 8, 131072, 256, lambda: 9, H200) is None


def test_the_device_is_asked_only_for_a_listed_formats_tall_8_column_pass():
    def no_device():
        raise AssertionError("asked")
    assert mmvq_mma.mma_config("q2_0", 8, 131072, 256, no_device, no_device) is None
    assert mmvq_mma.mma_config("iq4_nl", 4, 131072, 256, no_device, no_device) is None
    assert mmvq_mma.mma_config("iq4_nl", 8, 4096, 256, no_device, no_device) is None  # below min_rows
    assert mmvq_mma.mma_config("iq4_nl", 8, 131072, 256, lambda: 7, no_device) is None  # sm_75: no limit needed


def test_the_shared_memory_limit_is_the_devices():
    """K = 14336 (448 chunks) needs 215064 bytes at TG = 4: it fits sm_90's 227 KiB opt-in, not sm_80's 163 KiB,
    where mmvq_new's kernel runs the pass; K = 8192 (159768 bytes) fits both."""
    a100 = lambda: A100_SHARED_OPTIN
    assert sum(mmvq_mma.MMA_CONFIGS["iq4_nl"].shared_bytes("iq4_nl", 448)) == 8 * 448 * 36 + 16 * 16 * 144 + 4 * 3 * 32 * 32 * 4 + 24
    assert mmvq_mma.mma_config("iq4_nl", 8, 131072, 448, lambda: 9, H200) == mmvq_mma.MmaConfig(4, 32768)
    assert mmvq_mma.mma_config("iq4_nl", 8, 131072, 448, lambda: 8, a100) is None
    assert mmvq_mma.mma_config("iq4_nl", 8, 131072, 256, lambda: 8, a100) == mmvq_mma.MmaConfig(4, 32768)


def test_a_group_row_is_the_odd_granule_count_that_covers_8_chunks_at_any_head():
    # iq4_nl 8 x 18 and q8_0 8 x 34 bytes start 16-aligned; an iq4_xs block (136) may start at 8: 9 granules;
    # iq2_xxs (66 at even heads) 5; iq1_s (50) 4, padded to 5
    assert [mmvq_mma.group_row_bytes(f) for f in ("iq4_nl", "q8_0", "iq4_xs", "iq2_xxs", "iq1_s")] == \
        [144, 272, 144, 80, 80]


def test_shared_memory_and_threads_of_a_pass():
    config = mmvq_mma.MMA_CONFIGS["iq4_nl"]
    # 8 columns x 256 blocks x 36 bytes, 16 warps x a 16-row x 8-block group (18-byte blocks), 4 trees
    assert config.shared_bytes("iq4_nl", 256) == (73728 + 36864 + 49152, 24)
    assert config.threads == 512 and mmvq_mma.MMA_CONFIGS["q8_0"].threads == 384
    assert config.kernel("iq4_nl") == "mmvq_mma<siq::fmt_iq4_nl, 4, 1, 1>"


def test_the_family_compiles_mmvq_mma_for_new():
    fam = Mmvq()
    assert "mmvq/mmvq_mma.cu" in fam.sources
    assert fam.name_expressions("mmvq/mmvq_mma.cu") == ["mmvq_mma<siq::fmt_iq4_nl, 4, 1, 1>",
                                                         "mmvq_mma<siq::fmt_iq4_xs, 4, 1, 1>",
                                                         "mmvq_mma<siq::fmt_q8_0, 3, 1, 1>",
                                                         "mmvq_mma<siq::fmt_iq1_s_pair, 4, 1, 1>",
                                                         "mmvq_mma<siq::fmt_iq2_xxs_pair, 4, 1, 1>",
                                                         "mmvq_mma<siq::fmt_iq1_m_k16pair, 4, 1, 1>",
                                                         "mmvq_mma<siq::fmt_iq2_xs_k16pair, 4, 1, 1>",
                                                         "mmvq_mma<siq::fmt_iq2_s_k16pair, 4, 1, 1>",
                                                         "mmvq_mma<siq::fmt_iq3_xxs, 4, 1, 1>",
                                                         "mmvq_mma<siq::fmt_iq3_s, 4, 1, 1>"]


def test_parity_covers_the_mma_passes():
    assert set(mmvq_mod.MMA_SHAPES) == set(mmvq_mma.MMA_CONFIGS) == set(mmvq_mod.MMA_TAIL_SHAPES)
    cases = [c for c in Mmvq().default_cases() if c.fmt in mmvq_mod.MMA_SHAPES]
    for fmt, (rows, cols) in mmvq_mod.MMA_SHAPES.items():
        tall = [c for c in cases if c.fmt == fmt and (c.rows, c.cols) == (rows, cols)]
        # then one column where that pass runs mmvq_onecol at these rows (tests/families/test_mmvq_onecol.py; iq1_m's
        # one-column cases have weight sets of their own, mmvq.ONECOL_SHAPES)
        onecol = mmvq_onecol.onecol_config(fmt, 1, rows) is not None
        assert [c.ncols for c in tall] == ([8, 11, 1] if onecol else [8, 11]), fmt
        assert mmvq_mma.mma_config(fmt, 8, rows, cols // 32, lambda: 9, H200) is not None


def test_parity_covers_the_mma_tails():
    # a last tile of 5 rows, and for the one-chunk formats a last 8-chunk group of one chunk
    cases = {c.name for c in Mmvq().default_cases()}
    for fmt, (rows, cols) in mmvq_mod.MMA_TAIL_SHAPES.items():
        assert f"mmvq/{fmt}/{rows}x{cols}/n8/seed:1" in cases
        assert mmvq_mma.mma_config(fmt, 8, rows, cols // 32, lambda: 9, H200) is not None and rows % 16 == 5
    # iq4_nl, iq4_xs, q8_0, iq1_s, iq2_xxs, iq1_m, iq2_xs, iq2_s, iq3_xxs, iq3_s
    assert [cols // 32 % 8 for rows, cols in mmvq_mod.MMA_TAIL_SHAPES.values()] == [1, 0, 1, 0, 0, 0, 0, 0, 0, 0]


@pytest.fixture
def kernels(monkeypatch):
    stub_launch_helpers(monkeypatch, mmvq_mod, mmvq_mma, mmvq_onecol)
    return RecordingKernels()


def _launch(kernels, rows, cols, ncols, variant="new"):
    fam = Mmvq()
    case = fam.case("iq4_nl", rows, cols, ncols, "seed:1")
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((ncols, cols), np.float32),
           "xq": np.zeros((ncols, cols // 32 * 36), np.uint8)}
    fam.launch(case, variant, kernels, dev, {"y": np.zeros((ncols, rows), np.float32)})
    return kernels.names


def test_new_runs_mmvq_mma_for_the_tall_8_column_pass_and_mmvq_new_for_the_rest(kernels):
    names = _launch(kernels, 32768, 1024, 11)
    assert names == ["quantize_q8_1", "mmvq_mma<siq::fmt_iq4_nl, 4, 1, 1>",
                     new_config("iq4_nl", 2).kernel("iq4_nl", 2), new_config("iq4_nl", 1).kernel("iq4_nl", 1)]
    _, grid, block, args, shared = kernels.calls[1]
    assert grid == (132,) and block == (512,)  # 2048 tiles, 4 per block: the resident blocks
    assert shared == mmvq_mma.MMA_CONFIGS["iq4_nl"].shared_bytes("iq4_nl", 32)[0]
    assert args[2] == 32768 and args[3] == 32 and args[4].shape == (8, 32 * 36) and args[6] == 32768


def test_new_asks_the_device_for_its_shared_memory_limit_at_launch(monkeypatch):
    """The same tall 8-column pass at K = 14336: mmvq_mma on an H200, mmvq_new's kernel on an A100 (163 KiB)."""
    for major, optin, second in ((9, H200_SHARED_OPTIN, "mmvq_mma<siq::fmt_iq4_nl, 4, 1, 1>"),
                                 (8, A100_SHARED_OPTIN, new_config("iq4_nl", 8).kernel("iq4_nl", 8))):
        stub_launch_helpers(monkeypatch, mmvq_mod, mmvq_mma, major=major, optin=optin)
        assert _launch(RecordingKernels(), 32768, 14336, 8) == ["quantize_q8_1", second], major


@pytest.mark.parametrize("fmt", ["iq1_s", "iq2_xxs"])
def test_new_runs_the_lane_pair_for_the_tall_8_column_pass_only(kernels, fmt):
    fam = Mmvq()
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 8192), np.float32), "xq": np.zeros((11, 256 * 36), np.uint8)}
    fam.launch(fam.case(fmt, 131072, 8192, 11, "seed:1"), "new", kernels, dev, {"y": np.zeros((11, 131072), np.float32)})
    # the one-column pass: mmvq_onecol at these rows (tests/families/test_mmvq_onecol.py)
    assert kernels.names == ["quantize_q8_1", f"mmvq_mma<siq::fmt_{fmt}_pair, 4, 1, 1>",
                             new_config(fmt, 2).kernel(fmt, 2), mmvq_onecol.ONECOL_CONFIGS[fmt].kernel]
    _, grid, block, args, shared = kernels.calls[1]
    assert grid == (132,) and block == (512,)  # 8192 tiles, 4 a block: one resident block an SM
    assert shared == mmvq_mma.MMA_CONFIGS[fmt].shared_bytes(fmt, 256)[0]
    assert args[2] == 131072 and args[3] == 256 and args[4].shape == (8, 256 * 36) and args[6] == 131072
    kernels.calls.clear()
    fam.launch(fam.case(fmt, 4096, 14336, 8, "seed:1"), "new", kernels,
               {**dev, "x": np.zeros((8, 14336), np.float32), "xq": np.zeros((8, 448 * 36), np.uint8)},
               {"y": np.zeros((8, 4096), np.float32)})
    assert kernels.names == ["quantize_q8_1", new_config(fmt, 8).kernel(fmt, 8)]


@pytest.mark.parametrize("fmt,frag", [(f, frag) for f, frag, _, _ in MMA5])
def test_new_runs_the_other_1_to_3_bit_formats_mma_pass_from_32768_rows(kernels, fmt, frag):
    fam = Mmvq()
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((11, 8192), np.float32), "xq": np.zeros((11, 256 * 36), np.uint8)}
    fam.launch(fam.case(fmt, 32768, 8192, 11, "seed:1"), "new", kernels, dev, {"y": np.zeros((11, 32768), np.float32)})
    tag = f"{fmt}_{frag}" if frag else fmt
    assert kernels.names == ["quantize_q8_1", f"mmvq_mma<siq::fmt_{tag}, 4, 1, 1>",
                             new_config(fmt, 2).kernel(fmt, 2), new_config(fmt, 1).kernel(fmt, 1)]
    _, grid, block, args, shared = kernels.calls[1]
    assert grid == (132,) and block == (512,)  # 2048 tiles, 4 a block: the resident blocks
    assert shared == mmvq_mma.MMA_CONFIGS[fmt].shared_bytes(fmt, 256)[0]
    assert args[2] == 32768 and args[3] == 256 and args[4].shape == (8, 256 * 36) and args[6] == 32768
    kernels.calls.clear()
    fam.launch(fam.case(fmt, 16384, 8192, 8, "seed:1"), "new", kernels, {**dev, "x": dev["x"][:8], "xq": dev["xq"][:8]},
               {"y": np.zeros((8, 16384), np.float32)})
    assert kernels.names == ["quantize_q8_1", new_config(fmt, 8).kernel(fmt, 8)]


def test_new_keeps_mmvq_new_on_short_shapes(kernels):
    assert _launch(kernels, 4096, 1024, 8) == ["quantize_q8_1", new_config("iq4_nl", 8).kernel("iq4_nl", 8)]


def test_launch_candidates_never_take_the_mma_path(kernels):
    """experiments/mmvq_tune times its own configs through launch_new_passes, without tensor_cores."""
    fam = Mmvq()
    case = fam.case("iq4_nl", 32768, 1024, 8, "seed:1")
    dev = {"w": np.zeros(16, np.uint8), "x": np.zeros((8, 1024), np.float32), "xq": np.zeros((8, 32 * 36), np.uint8)}
    fam.launch_new_passes(case, kernels, dev, {"y": np.zeros((8, 32768), np.float32)}, new_config)
    assert kernels.names == ["quantize_q8_1", new_config("iq4_nl", 8).kernel("iq4_nl", 8)]
