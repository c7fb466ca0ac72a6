"""The generated i-quant tables: current with the installed gguf, and laid out as documented."""
from __future__ import annotations

import re

import numpy as np
import pytest

from strata_bench.kernels import tables


def _parsed_array(text: str, name: str) -> list[int]:
    """The values of one array in the header text, parsed back from C literals."""
    match = re.search(rf"{name}\[(\d+)\] = \{{(.*?)\}};", text, re.S)
    assert match, f"{name} missing from the header"
    items = [s.strip() for s in match.group(2).split(",") if s.strip()]
    assert len(items) == int(match.group(1))
    return [int(s.rstrip("ul"), 0) for s in items]


def test_committed_header_is_current():
    # Fails when gguf's tables change (or someone edits the header) until the header is regenerated.
    assert tables.is_current(), "run `python -m strata_bench.kernels.tables` and commit the header"


def test_header_names_gguf_version_and_says_generated():
    first = tables.header_path().read_text().splitlines()[0]
    assert f"gguf {tables.gguf_version()}" in first and "do not edit" in first


def test_stale_header_is_detected(tmp_path):
    tables.write_header(tmp_path)
    assert tables.is_current(tmp_path)
    path = tables.header_path(tmp_path)
    path.write_text(path.read_text().replace("0x0808080808080808ull", "0x0808080808080809ull", 1))
    assert not tables.is_current(tmp_path)
    assert tables.main(["--check"]) == 0  # the repo copy is still fine


def test_iq2xxs_grid_matches_gguf_dequantize():
    # One IQ2_XXS block whose four groups of 8 use grid entries 0, 1, 2, 255 with scale 0, no signs:
    # gguf gives d*0.5*0.25*grid, so grid = value / (d/8).
    from gguf import quants
    from gguf.constants import GGMLQuantizationType

    block = np.zeros(66, dtype=np.uint8)
    block[0:2] = np.array([1.0], dtype=np.float16).view(np.uint8)
    block[2:6] = [0, 1, 2, 255]
    values = quants.dequantize(block, GGMLQuantizationType.IQ2_XXS)[:32] * 8
    words = tables.table_arrays()["iq2xxs_grid"][1]
    for group, index in enumerate([0, 1, 2, 255]):
        expect = [(int(words[index]) >> (8 * i)) & 0xFF for i in range(8)]
        assert values[8 * group: 8 * group + 8].tolist() == expect


def test_known_entries():
    arrays = tables.table_arrays()
    assert int(arrays["iq2xxs_grid"][1][1]) == 0x080808080808082B
    assert int(arrays["iq3xxs_grid"][1][1]) == 0x04040414
    assert arrays["kvalues_iq4nl"][1].tolist()[:3] == [-127, -104, -83]
    assert int(arrays["kvalues_iq4nl_u32"][1][0]) == 0xBFAD9881  # bytes -127,-104,-83,-65


def test_sizes():
    sizes = {name: len(v) for name, (_, v) in tables.table_arrays().items()}
    assert sizes == {
        "iq2xxs_grid": 256, "iq2xs_grid": 512, "iq2s_grid": 1024, "iq3xxs_grid": 256,
        "iq2xxs_grid_nib": 256, "iq2xs_grid_nib": 512, "iq2s_grid_nib": 1024,
        "iq3s_grid": 512, "iq1s_grid": 2048, "iq1s_grid_nib": 2048, "ksigns_iq2xs": 128,
        "ksigns_mask64": 128, "sign_mask64": 256, "kvalues_iq4nl": 16, "kvalues_iq4nl_u32": 4,
    }


def test_iq1_layouts_agree():
    arrays = tables.table_arrays()
    grid = arrays["iq1s_grid"][1].astype(np.uint64)
    nib = arrays["iq1s_grid_nib"][1].astype(np.uint64)
    for entry in (0, 1, 777, 2047):
        as_int8 = np.array([(int(grid[entry]) >> (8 * i)) & 0xFF for i in range(8)], np.uint8).view(np.int8)
        codes = [(int(nib[entry]) >> (4 * i)) & 0xF for i in range(8)]
        assert (as_int8 + 1).tolist() == codes
        assert set(codes) <= {0, 1, 2}


@pytest.mark.parametrize("name", ["iq2xxs", "iq2xs", "iq2s"])
def test_iq2_nibble_grids_select_the_uint64_grid(name):
    # Emulates __byte_perm(STRATA_IQ2_GRID_MAP, 0, selector): byte i = grid_map byte (nibble i).
    arrays = tables.table_arrays()
    grid = arrays[f"{name}_grid"][1]
    nib = arrays[f"{name}_grid_nib"][1]
    grid_map = tables.constants()["STRATA_IQ2_GRID_MAP"]
    for entry in range(len(grid)):
        selected = [(grid_map >> (8 * ((int(nib[entry]) >> (4 * i)) & 0xF))) & 0xFF for i in range(8)]
        assert selected == [(int(grid[entry]) >> (8 * i)) & 0xFF for i in range(8)]


def test_iq1_words_are_eight_times_value_with_delta():
    from gguf import quants

    consts = tables.constants()
    as_bytes = lambda w: np.array([(w >> (8 * i)) & 0xFF for i in range(3)], np.uint8).view(np.int8)
    grid_map = np.array(quants.IQ1_S.grid_map, dtype=np.float64)
    delta = float(quants.IQ1_S.delta)
    assert as_bytes(consts["STRATA_IQ1_W_POS"]).tolist() == (8 * (grid_map + delta)).tolist()
    assert as_bytes(consts["STRATA_IQ1_W_NEG"]).tolist() == (8 * (grid_map - delta)).tolist()


def test_ksigns_is_index_plus_parity_bit():
    # The kernels compute ksigns arithmetically (no table lookup); this proves the formula on gguf's table.
    ksigns = tables.table_arrays()["ksigns_iq2xs"][1]
    assert [k | ((bin(k).count("1") & 1) << 7) for k in range(128)] == ksigns.tolist()


def _spread_loop(s8: int) -> int:
    """Sign bit i -> bit 4i+2, the plain way."""
    return sum(((s8 >> i) & 1) << (4 * i + 2) for i in range(8))


def test_sign_nibble_multiplies_match_a_bit_loop():
    # decode_ops.cuh's sign_nibbles / ksign_nibbles, transcribed: one multiply per parity of bit position.
    even = lambda s: ((s & 0x55) * 0x104104) & 0x04040404
    odd = lambda s: ((s & 0xAA) * 0x820820) & 0x40404040
    ksigns = tables.table_arrays()["ksigns_iq2xs"][1]
    for s8 in range(256):
        assert (even(s8) | odd(s8)) & 0xFFFFFFFF == _spread_loop(s8)
    for k in range(128):
        kodd = (((k & 0x2A) * 0x820820) | (bin(k).count("1") << 30)) & 0x40404040
        assert (even(k) | kodd) & 0xFFFFFFFF == _spread_loop(int(ksigns[k]))


def _prmt_sign_replicate(x: int) -> int:
    """prmt(x, 0, 0xBA98): each byte becomes 0xFF where its top bit is set, else 0."""
    return sum(0xFF << (8 * i) for i in range(4) if (x >> (8 * i + 7)) & 1)


def test_ksign_masks_equal_the_masks_of_ksigns8_for_every_index():
    # decode_ops.cuh's ksign_mask_lo/hi (no AND, the parity as popc * 128), transcribed, against
    # sign_mask_lo/hi(ksigns8(k7)) and against gguf's ksigns table, for all 128 indexes.
    ksigns = tables.table_arrays()["ksigns_iq2xs"][1]
    for k in range(128):
        s8 = int(ksigns[k])
        lo = _prmt_sign_replicate((k * 0x10204080) & 0xFFFFFFFF)
        hi = _prmt_sign_replicate((((bin(k).count("1") * 128 + k) >> 4) * 0x10204080) & 0xFFFFFFFF)
        assert lo == _prmt_sign_replicate((s8 & 0x0F) * 0x10204080)
        assert hi == _prmt_sign_replicate((s8 & 0xF0) * 0x01020408)
        assert lo | (hi << 32) == sum(0xFF << (8 * i) for i in range(8) if (s8 >> i) & 1)


def test_sign_masks_follow_ksigns():
    arrays = tables.table_arrays()
    ksigns = arrays["ksigns_iq2xs"][1]
    masks = arrays["ksigns_mask64"][1]
    for k in (0, 1, 77, 127):
        expect = sum(0xFF << (8 * i) for i in range(8) if (int(ksigns[k]) >> i) & 1)
        assert int(masks[k]) == expect
        # ggml's sign parity: the 8th bit makes the popcount even
        assert bin(int(ksigns[k])).count("1") % 2 == 0
    assert int(arrays["sign_mask64"][1][0x81]) == 0xFF000000000000FF


def test_header_text_round_trips_every_table():
    text = tables.render_header()
    for name, (ctype, values) in tables.table_arrays().items():
        parsed = _parsed_array(text, name)
        expect = [int(v) for v in values]
        if ctype == "int8_t":
            assert parsed == expect
        else:
            assert parsed == [v & (2 ** (8 * np.dtype(ctype.replace("_t", "")).itemsize) - 1) for v in expect]


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_90"])
def test_header_compiles(arch):
    from strata_bench.kernels import nvrtc

    src = ('#include "generated/iq_tables.cuh"\n'
           'extern "C" __global__ void k(unsigned long long* o, int i) { o[0] = iq2s_grid[i] ^ iq1s_grid[i] '
           '^ ksigns_mask64[i & 127] ^ sign_mask64[i & 255] ^ kvalues_iq4nl[i & 15]; }\n')
    cubin, _, _ = nvrtc.compile_program(src, "t.cu", [], [f"--gpu-architecture={arch}", "-std=c++17",
                                                         f"-I{tables.header_path().parent.parent}"])
    assert cubin[:4] == b"\x7fELF"
