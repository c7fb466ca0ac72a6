"""Formats: geometry against gguf, exact float64 values against slow per-element decoders written from
the block layouts, random and edge-case generators, Q2_0's reference."""
from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest
from gguf.constants import GGML_QUANT_SIZES

from strata_bench.errors import InputError
from strata_bench.formats import all_formats, get_format

REQUIRED = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_nl", "iq4_xs",
            "q8_0", "q4_0", "q4_1", "q5_0", "q3_k", "q4_k", "q6_k", "q2_0")


def _f16(raw: bytes) -> float:
    return float(np.frombuffer(raw, dtype=np.float16)[0])


def _grid(cls) -> np.ndarray:
    cls.init_grid()
    return cls.grid.reshape(-1, cls.grid_shape[1]).astype(np.float64)


# --- slow decoders: one element at a time, from the layouts in FORMATS.md / ggml's C loops ----------
def slow_q8_0(b: bytes) -> list[float]:
    d = _f16(b[0:2])
    return [d * struct.unpack("b", b[2 + j:3 + j])[0] for j in range(32)]


def slow_q4_1(b: bytes) -> list[float]:
    d, m = _f16(b[0:2]), _f16(b[2:4])
    return [d * ((b[4 + j % 16] >> (4 * (j // 16))) & 15) + m for j in range(32)]


def slow_q4_k(b: bytes) -> list[float]:
    d, dmin, sc, qs = _f16(b[0:2]), _f16(b[2:4]), b[4:16], b[16:]
    out = []
    for sub in range(8):
        if sub < 4:
            scale, mins = sc[sub] & 63, sc[sub + 4] & 63
        else:
            scale = (sc[sub + 4] & 15) | ((sc[sub - 4] >> 6) << 4)
            mins = (sc[sub + 4] >> 4) | ((sc[sub] >> 6) << 4)
        chunk, high = divmod(sub, 2)
        for l in range(32):
            q = (qs[32 * chunk + l] >> (4 * high)) & 15
            out.append(d * scale * q - dmin * mins)
    return out


def slow_q6_k(b: bytes) -> list[float]:
    ql, qh, d = b[0:128], b[128:192], _f16(b[208:210])
    scales = struct.unpack("16b", b[192:208])
    out = [0.0] * 256
    for half in range(2):
        for l in range(32):
            lo, hi, h = ql[64 * half + l], ql[64 * half + l + 32], qh[32 * half + l]
            codes = (lo & 15 | (h & 3) << 4, hi & 15 | (h >> 2 & 3) << 4,
                     lo >> 4 | (h >> 4 & 3) << 4, hi >> 4 | (h >> 6 & 3) << 4)
            for k, q in enumerate(codes):
                out[128 * half + 32 * k + l] = d * scales[8 * half + l // 16 + 2 * k] * (q - 32)
    return out


def slow_q3_k(b: bytes) -> list[float]:
    hmask, qs, sc, d = b[0:32], b[32:96], b[96:108], _f16(b[108:110])
    scales = [((sc[i] if i < 8 else sc[i - 8] >> 4) & 15) | ((sc[8 + i % 4] >> (2 * (i // 4)) & 3) << 4)
              for i in range(16)]
    out = []
    for j in range(256):
        half, rest = divmod(j, 128)
        shift_pair, l = divmod(rest, 32)  # 32 values per 2-bit plane of 32 bytes
        q = (qs[32 * half + l] >> (2 * shift_pair)) & 3
        high = hmask[l] >> (4 * half + shift_pair) & 1
        out.append(d * (scales[j // 16] - 32) * (q - (0 if high else 4)))
    return out


def slow_iq4_xs(b: bytes) -> list[float]:
    kvalues = gguf.quants.IQ4_NL.kvalues
    d, scales_h, scales_l, qs = _f16(b[0:2]), b[2] | b[3] << 8, b[4:8], b[8:]
    out = []
    for ib in range(8):
        ls = (scales_l[ib // 2] >> (4 * (ib % 2)) & 15) | ((scales_h >> (2 * ib) & 3) << 4)
        for j in range(32):
            byte = qs[16 * ib + j % 16]
            out.append(d * (ls - 32) * kvalues[(byte >> (4 * (j // 16))) & 15])
    return out


def slow_iq1_m(b: bytes) -> list[float]:
    grid, delta = _grid(gguf.quants.IQ1_S), 0.125
    qs, qh = b[0:32], b[32:48]
    sc = struct.unpack("<4H", b[48:56])
    d = float(np.uint16((sc[0] >> 12) | (sc[1] >> 8 & 0xF0) | (sc[2] >> 4 & 0xF00) | (sc[3] & 0xF000))
              .view(np.float16))
    out = []
    for ib in range(8):
        for group in range(4):
            h = qh[2 * ib + group // 2] >> (4 * (group % 2))
            index = qs[4 * ib + group] | ((h & 7) << 8)
            sign = -delta if h & 8 else delta
            ls = sc[ib // 2] >> (6 * (ib % 2) + 3 * (group // 2)) & 7
            out.extend(d * (2 * ls + 1) * (g + sign) for g in grid[index])
    return out


def slow_iq2_xxs(b: bytes) -> list[float]:
    grid, ksigns = _grid(gguf.quants.IQ2_XXS), gguf.quants.IQ2_XXS.ksigns
    d = _f16(b[0:2])
    out = []
    for ib in range(8):
        indexes = b[2 + 8 * ib: 6 + 8 * ib]
        aux = struct.unpack("<I", b[6 + 8 * ib: 10 + 8 * ib])[0]
        db = d * (0.5 + (aux >> 28)) * 0.25
        for l in range(4):
            signs = ksigns[(aux >> (7 * l)) & 127]
            out.extend(db * g * (-1 if signs >> j & 1 else 1) for j, g in enumerate(grid[indexes[l]]))
    return out


def slow_q2_0(b: bytes) -> list[float]:
    d = _f16(b[0:2])
    return [d * (2 * ((b[2 + j % 16] >> (2 * (j // 16))) & 3) - 3) for j in range(64)]


SLOW = {"q8_0": slow_q8_0, "q4_1": slow_q4_1, "q4_k": slow_q4_k, "q6_k": slow_q6_k, "q3_k": slow_q3_k,
        "iq4_xs": slow_iq4_xs, "iq1_m": slow_iq1_m, "iq2_xxs": slow_iq2_xxs, "q2_0": slow_q2_0}


def _sample_blocks(fmt, seed=3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([fmt.random_blocks(rng, 3), fmt.edge_blocks(rng)])


# --- geometry and registry -----------------------------------------------------------------------
def test_every_required_format_is_registered_with_ggml_geometry():
    formats = all_formats()
    assert set(REQUIRED) <= set(formats)
    for name in REQUIRED:
        fmt = formats[name]
        if fmt.qtype is not None:
            assert GGML_QUANT_SIZES[fmt.qtype] == (fmt.block_size, fmt.type_size), name
            assert fmt.qtype.name.lower() == name
    assert (formats["q2_0"].block_size, formats["q2_0"].type_size, formats["q2_0"].qtype) == (64, 18, None)


def test_unknown_format_and_bad_row_length_are_input_errors():
    assert get_format("IQ2_XXS").name == "iq2_xxs"
    with pytest.raises(InputError, match="iq9_z"):
        get_format("iq9_z")
    with pytest.raises(InputError, match="500"):
        get_format("iq2_xxs").bytes_per_row(500)
    assert get_format("q2_0").bytes_per_row(2560) == 40 * 18


# --- values --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SLOW))
def test_dequantize_f64_equals_a_slow_float64_decode(name):
    fmt = get_format(name)
    blocks = _sample_blocks(fmt)
    exact = fmt.dequantize_f64(blocks)
    for i, block in enumerate(blocks):
        expected = np.array(SLOW[name](bytes(block)), dtype=np.float64)
        np.testing.assert_array_equal(exact[i], expected, err_msg=f"{name} block {i}")


@pytest.mark.parametrize("name", REQUIRED)
def test_float32_oracle_is_the_float64_values_rounded(name):
    fmt = get_format(name)
    blocks = _sample_blocks(fmt)
    v32, v64 = fmt.dequantize(blocks), fmt.dequantize_f64(blocks)
    assert v32.dtype == np.float32 and v32.shape == (len(blocks), fmt.block_size)
    # gguf rounds the scale products in float32, a few ulps at most.
    np.testing.assert_allclose(v32, v64, rtol=4e-7, atol=0)
    if fmt.qtype is not None:
        np.testing.assert_array_equal(v32, gguf.quants.dequantize(blocks, fmt.qtype))


def test_rows_keep_their_shape():
    fmt = get_format("iq3_s")
    raw = fmt.random_blocks(np.random.default_rng(0), 6).reshape(3, 2 * fmt.type_size)
    assert fmt.dequantize(raw).shape == (3, 512)
    assert fmt.dequantize_f64(raw).shape == (3, 512)


def test_q2_0_reference_matches_its_definition_and_quantizer_round_trips():
    fmt = get_format("q2_0")
    block = np.zeros((1, 18), dtype=np.uint8)
    block[0, :2] = np.frombuffer(np.float16(0.5).tobytes(), dtype=np.uint8)
    block[0, 2] = 0b11_10_01_00  # element 0 -> q0, 16 -> q1, 32 -> q2, 48 -> q3
    values = fmt.dequantize(block)[0]
    assert values[[0, 16, 32, 48]].tolist() == [-1.5, -0.5, 0.5, 1.5]
    assert values[1] == -1.5  # code 0 elsewhere
    rng = np.random.default_rng(9)
    blocks = fmt.random_blocks(rng, 50)
    blocks[:, :2] = np.frombuffer(np.abs(rng.normal(size=50)).astype(np.float16).tobytes(),
                                  dtype=np.uint8).reshape(50, 2)
    np.testing.assert_array_equal(fmt.quantize(fmt.dequantize(blocks)), blocks)


# --- generators ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", REQUIRED)
def test_random_blocks_are_seeded_with_small_finite_scales_in_place(name):
    fmt = get_format(name)
    first = fmt.random_blocks(np.random.default_rng(11), 2000)
    assert first.shape == (2000, fmt.type_size) and first.dtype == np.uint8
    np.testing.assert_array_equal(first, fmt.random_blocks(np.random.default_rng(11), 2000))
    assert not np.array_equal(first, fmt.random_blocks(np.random.default_rng(12), 2000))
    # A scale read from the wrong bytes would be uniform fp16 bits: huge, or inf/nan.
    for scale in fmt.scale_values(first).values():
        assert np.isfinite(scale).all()
        assert 0.7e-3 < scale.std() < 1.3e-3
    values = fmt.dequantize(first)
    assert np.isfinite(values).all() and float(np.abs(values).max()) < 100.0  # 6 sigma x 4096 (Q6_K) is 25


@pytest.mark.parametrize("name", REQUIRED)
def test_edge_blocks_cover_the_extremes(name):
    fmt = get_format(name)
    cases = dict(fmt.edge_cases(np.random.default_rng(5)))
    assert len(cases) == len(fmt.edge_blocks(np.random.default_rng(5)))
    peak = {label: np.abs(fmt.dequantize_f64(block)).max() for label, block in cases.items()}
    assert peak["zero scale"] == 0
    assert all(np.isfinite(fmt.dequantize(block)).all() for block in cases.values())
    scales = {label: fmt.scale_values(block) for label, block in cases.items()}
    assert all(float(s[0]) == 65504 for s in scales["largest finite scale"].values())
    assert all(0 < abs(float(s[0])) < 6.2e-5 for s in scales["smallest subnormal scale"].values())
    assert 2.9e4 < peak["outlier ~30000"] < 3.1e4
    # The loudest code pattern is at least as loud as the other extremes with the same scale.
    assert peak["codes largest |value|"] >= max(peak["codes all 0x00"], peak["codes all 0xFF"]) > 0


def test_describe_block_decodes_scales_and_values():
    fmt = get_format("q4_k")
    block = dict(fmt.edge_cases(np.random.default_rng(0)))["largest finite scale"]
    text = fmt.describe_block(block)
    assert "d=65504 (0x7bff)" in text and "dmin=65504 (0x7bff)" in text and "first values" in text
    assert "d=" in get_format("iq1_m").describe_block(fmt.random_blocks(np.random.default_rng(0), 1)[0][:56])


# --- the registry ----------------------------------------------------------------------------------
def test_a_second_format_with_a_taken_name_is_refused_and_names_both_classes():
    from strata_bench.errors import RegistryError
    from strata_bench.formats import FORMATS, QuantFormat

    held = get_format("q8_0")
    with pytest.raises(RegistryError, match=r"'q8_0' is taken: strata_bench\.formats\.legacy\.Q8_0 holds it.*MyQ8"):
        class MyQ8(QuantFormat, name="q8_0", block_size=32, type_size=34):
            pass
    assert FORMATS["q8_0"] is held


def test_a_subclass_of_a_format_that_names_none_of_its_own_is_refused():
    from strata_bench.errors import RegistryError
    from strata_bench.formats.legacy import Q8_0

    before = dict(all_formats())
    with pytest.raises(RegistryError, match="Q8Tweak inherits the name 'q8_0' of Q8_0"):
        class Q8Tweak(Q8_0):
            pass
    assert all_formats() == before


def test_a_base_class_without_a_name_is_allowed():
    from strata_bench.formats._common import ScaledFormat

    before = dict(all_formats())

    class _AnotherBase(ScaledFormat):
        pass

    assert all_formats() == before
