"""MXFP4 and NVFP4: exact float64 values against slow decoders, bitwise float32 equality with gguf-py,
and their seeded random and edge-case blocks."""
from __future__ import annotations

import math

import gguf
import numpy as np
import pytest

from strata_bench.formats import get_format

NAMES = ("mxfp4", "nvfp4")


def _e2m1(nibble: int) -> float:
    """OCP E2M1, written out: sign bit 3, exponent bits 1-2 (bias 1), mantissa bit 0."""
    sign = -1.0 if nibble & 8 else 1.0
    exponent, mantissa = (nibble >> 1) & 3, nibble & 1
    return sign * (mantissa * 0.5 if exponent == 0 else (1 + mantissa / 2) * 2.0 ** (exponent - 1))


def _ue4m3(code: int) -> float:
    if code in (0, 0x7F):
        return 0.0
    exponent, mantissa = (code >> 3) & 15, code & 7
    return math.ldexp(mantissa, -9) if exponent == 0 else math.ldexp(1 + mantissa / 8, exponent - 7)


def slow_mxfp4(b: bytes) -> list[float]:
    scale, qs = math.ldexp(1.0, b[0] - 127), b[1:17]
    return [scale * _e2m1((qs[j % 16] >> (4 * (j // 16))) & 15) for j in range(32)]


def slow_nvfp4(b: bytes) -> list[float]:
    out = []
    for sub in range(4):
        scale, qs = _ue4m3(b[sub]), b[4 + 8 * sub: 12 + 8 * sub]
        out.extend(scale * _e2m1((qs[j % 8] >> (4 * (j // 8))) & 15) for j in range(16))
    return out


SLOW = {"mxfp4": slow_mxfp4, "nvfp4": slow_nvfp4}


@pytest.mark.parametrize("name", NAMES)
def test_dequantize_f64_equals_a_slow_float64_decode(name, assert_slow_decode):
    assert_slow_decode(name, SLOW[name])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float32_is_gguf_pys_bit_for_bit_and_is_the_float64_value(name, seed, samples):
    fmt = get_format(name)
    blocks = np.concatenate([samples(fmt, seed), fmt.random_blocks(np.random.default_rng(seed), 500)])
    v32, v64 = fmt.dequantize(blocks), fmt.dequantize_f64(blocks)
    oracle = gguf.quants.dequantize(blocks, fmt.qtype)
    np.testing.assert_array_equal(v32.view(np.uint32), oracle.view(np.uint32))
    # E2M1 times a power of two (or a 4-bit UE4M3 mantissa) is exact: float64 rounds to gguf-py's float32
    # without changing, so the two are the same number. Only zeros may differ in sign (gguf-py's product
    # gives -0 for a negative code times a zero scale; the float64 sum of the fields' terms gives +0).
    rounded = v64.astype(np.float32)
    nonzero = oracle != 0
    np.testing.assert_array_equal(rounded[nonzero].view(np.uint32), oracle[nonzero].view(np.uint32))
    np.testing.assert_array_equal(rounded == 0, ~nonzero)
    np.testing.assert_array_equal(v64, oracle.astype(np.float64))


def test_every_mxfp4_scale_byte_with_every_code_matches_gguf_py():
    fmt = get_format("mxfp4")
    blocks = np.zeros((256, 17), dtype=np.uint8)
    blocks[:, 0] = np.arange(256)
    blocks[:, 1:9] = np.array([0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE], dtype=np.uint8)  # codes 0..15
    with np.errstate(over="ignore"):  # bytes 253-255 overflow float32 with the larger codes
        oracle = gguf.quants.dequantize(blocks, fmt.qtype)
    finite = np.isfinite(oracle)
    np.testing.assert_array_equal(fmt.dequantize_f64(blocks)[finite], oracle[finite].astype(np.float64))
    assert finite[:253].all()  # 6 * 2^125 (byte 252) is the largest finite value


def test_every_nvfp4_scale_byte_matches_gguf_py_in_every_sub_block():
    fmt = get_format("nvfp4")
    blocks = np.zeros((256, 36), dtype=np.uint8)
    blocks[:, :4] = (np.arange(256)[:, None] + np.arange(4)[None, :] * 64) % 256
    blocks[:, 4:] = np.tile(np.array([0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE], dtype=np.uint8), 4)
    oracle = gguf.quants.dequantize(blocks, fmt.qtype)
    np.testing.assert_array_equal(fmt.dequantize_f64(blocks), oracle.astype(np.float64))


# --- generators ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_random_blocks_are_seeded_with_small_scales_in_place(name):
    fmt = get_format(name)
    first = fmt.random_blocks(np.random.default_rng(11), 2000)
    assert first.shape == (2000, fmt.type_size) and first.dtype == np.uint8
    np.testing.assert_array_equal(first, fmt.random_blocks(np.random.default_rng(11), 2000))
    assert not np.array_equal(first, fmt.random_blocks(np.random.default_rng(12), 2000))
    for field in fmt.scales:
        low, high = field.RANDOM_CODES
        codes = field.read_bits(first)
        assert codes.min() == low and codes.max() == high  # every code of the range, nothing else
    values = fmt.dequantize(first)
    assert np.isfinite(values).all() and 0.01 < float(np.abs(values).max()) < 1.0


def _edge(name):
    fmt = get_format(name)
    cases = dict(fmt.edge_cases(np.random.default_rng(5)))
    assert len(cases) == len(fmt.edge_blocks(np.random.default_rng(5)))
    np.testing.assert_array_equal(np.stack(list(cases.values())), fmt.edge_blocks(np.random.default_rng(5)))
    peak = {label: float(np.abs(fmt.dequantize_f64(block)).max()) for label, block in cases.items()}
    assert all(np.isfinite(fmt.dequantize(block)).all() for block in cases.values())
    assert peak["codes largest |value|"] >= peak["codes all 0xFF"] > 0
    return fmt, cases, peak


def test_mxfp4_edge_blocks_cover_its_scale_extremes():
    fmt, cases, peak = _edge("mxfp4")
    scale = {label: int(block[0]) for label, block in cases.items()}
    assert scale["smallest scale 2^-127"] == 0 and peak["smallest scale 2^-127"] == 6 * 2.0 ** -127
    assert scale["scale 2^-126"] == 1
    assert peak["largest scale with finite values 2^125"] == 6 * 2.0 ** 125
    assert scale["largest finite scale 2^127, codes +-0.5"] == 254
    assert peak["largest finite scale 2^127, codes +-0.5"] == 2.0 ** 126
    assert peak["codes all 0x00"] == 0  # E8M0 has no zero: the all-zero block comes from the codes
    assert 3e4 / 2 ** 0.5 <= peak["outlier ~30000"] <= 3e4 * 2 ** 0.5  # the nearest power-of-two scale


def test_nvfp4_edge_blocks_cover_its_scale_extremes():
    fmt, cases, peak = _edge("nvfp4")
    scales = {label: fmt.scale_values(block) for label, block in cases.items()}
    assert peak["zero scale"] == 0 and peak["NaN code 0x7f (read as zero)"] == 0
    assert all(int(b) == 0x7F for b in cases["NaN code 0x7f (read as zero)"][:4])
    assert all(float(s[0]) == 448 for s in scales["largest finite scale"].values())
    assert peak["largest finite scale"] == 448 * 6
    assert all(float(s[0]) == 2.0 ** -9 for s in scales["smallest subnormal scale"].values())
    assert all(float(s[0]) == 7 * 2.0 ** -9 for s in scales["largest subnormal scale"].values())
    # Its largest value, 448 * 6, is below the 3e4 target: the outlier block is the loudest one there is.
    assert peak["outlier at the largest value 2688"] == 448 * 6


def test_describe_block_shows_the_scale_and_its_byte():
    fmt = get_format("mxfp4")
    block = dict(fmt.edge_cases(np.random.default_rng(0)))["scale 2^-126"]
    assert f"e={2.0 ** -126:.6g} (0x01)" in fmt.describe_block(block)
    nv = get_format("nvfp4").describe_block(dict(get_format("nvfp4").edge_cases(np.random.default_rng(0)))
                                            ["largest finite scale"])
    assert all(f"d{k}=448 (0x7e)" in nv for k in range(4))
