"""Non-fp16 scale fields: E8M0 and UE4M3 decode exactly (checked against gguf-py's own decoders on every
byte), encode to the nearest code, and read and write the byte they own."""
from __future__ import annotations

import math

import gguf
import numpy as np
import pytest

from strata_bench.formats._minifloat import E8M0At, UE4M3At

ALL_BYTES = np.arange(256, dtype=np.uint8)


def _ue4m3(code: int) -> float:
    """The OCP definition, written out: unsigned, 4 exponent bits (bias 7), 3 mantissa bits."""
    if code in (0, 0x7F):
        return 0.0  # 0x7F is E4M3's NaN; ggml reads it as zero
    exponent, mantissa = (code >> 3) & 15, code & 7  # ggml ignores bit 7 (so 0xFF is 480)
    return math.ldexp(mantissa, -9) if exponent == 0 else math.ldexp(1 + mantissa / 8, exponent - 7)


def test_e8m0_is_a_power_of_two_and_half_of_it_is_gguf_pys_float32_bit_for_bit():
    field = E8M0At("e", 0)
    scale = field.decode(ALL_BYTES)
    np.testing.assert_array_equal(scale, [math.ldexp(1.0, e - 127) for e in range(256)])
    halved = gguf.quants.MXFP4.e8m0_to_fp32_half(ALL_BYTES)
    assert halved.dtype == np.float32
    np.testing.assert_array_equal((scale / 2).astype(np.float32).view(np.uint32), halved.view(np.uint32))
    np.testing.assert_array_equal(scale / 2, halved.astype(np.float64))  # the float64 value is the float32 one


def test_ue4m3_decodes_exactly_and_half_of_it_is_gguf_pys_float32_bit_for_bit():
    field = UE4M3At("d", 0)
    scale = field.decode(ALL_BYTES)
    np.testing.assert_array_equal(scale, [_ue4m3(c) for c in range(256)])
    halved = gguf.quants.NVFP4.ue4m3_to_fp32(ALL_BYTES)
    np.testing.assert_array_equal((scale / 2).astype(np.float32).view(np.uint32),
                                  halved.astype(np.float32).view(np.uint32))
    np.testing.assert_array_equal(scale / 2, halved.astype(np.float64))
    assert scale[field.largest_bits] == 448 and scale[field.unit_bits] == 1.0 and scale[0x7F] == 0


@pytest.mark.parametrize("field", [E8M0At("e", 0), UE4M3At("d", 0)], ids=["e8m0", "ue4m3"])
def test_encode_gives_the_nearest_code_and_round_trips_every_ordinary_code(field):
    codes = np.array(field._codes(), dtype=np.uint8)
    np.testing.assert_array_equal(field.decode(field.encode(field.decode(codes))), field.decode(codes))
    values = np.random.default_rng(1).uniform(0, 2, 500) * 10.0 ** np.random.default_rng(2).integers(-4, 3, 500)
    chosen = field.decode(field.encode(values))
    every = field.decode(codes)
    nearest = np.abs(values[:, None] - every[None, :]).min(axis=1)
    np.testing.assert_array_equal(np.abs(values - chosen), nearest)


@pytest.mark.parametrize("field", [E8M0At("e", 3), UE4M3At("d2", 3)], ids=["e8m0", "ue4m3"])
def test_fields_read_and_write_only_their_own_byte(field):
    blocks = np.random.default_rng(0).integers(0, 256, (5, 8), dtype=np.uint8)
    before = blocks.copy()
    field.write_bits(blocks, np.array([1, 2, 3, 4, 5], dtype=np.uint8))
    assert blocks[:, 3].tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(np.delete(blocks, 3, axis=1), np.delete(before, 3, axis=1))
    assert field.read_bits(blocks).tolist() == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(field.read(blocks), field.decode(blocks[:, 3]))


def test_random_codes_stay_in_their_documented_small_range():
    rng = np.random.default_rng(5)
    e = E8M0At("e", 0).random_bits(rng, 4000)
    assert e.min() == 127 - 14 and e.max() == 127 - 7
    d = UE4M3At("d", 0).random_bits(rng, 4000)
    assert d.min() == 0x01 and d.max() == 0x1F
