"""Ternary formats TQ1_0 and TQ2_0: exact float64 values against slow decoders, and float32 exactness."""
from __future__ import annotations

import gguf
import numpy as np
import pytest

from strata_bench.formats import get_format


def _f16(raw: bytes) -> float:
    return float(np.frombuffer(raw, dtype=np.float16)[0])


def _base3_digit(byte: int, power: int) -> int:
    """ggml's TQ1_0 digit: the byte times 3^power (mod 256) read as a fraction of 256, times 3, floored."""
    return ((byte * 3 ** power) % 256 * 3) >> 8


def slow_tq1_0(b: bytes) -> list[float]:
    qs, qh, d = b[0:48], b[48:52], _f16(b[52:54])
    digits = [_base3_digit(qs[m], n) for n in range(5) for m in range(32)]  # first 32 bytes: 160 values
    digits += [_base3_digit(qs[32 + m], n) for n in range(5) for m in range(16)]  # next 16 bytes: 80 values
    digits += [_base3_digit(qh[m], n) for n in range(4) for m in range(4)]  # qh: the last 16 values
    return [d * (q - 1) for q in digits]


def slow_tq2_0(b: bytes) -> list[float]:
    qs, d = b[0:64], _f16(b[64:66])
    out = [0.0] * 256
    for j in range(256):
        half, rest = divmod(j, 128)
        shift, m = divmod(rest, 32)
        out[j] = d * (((qs[32 * half + m] >> (2 * shift)) & 3) - 1)
    return out


SLOW = {"tq1_0": slow_tq1_0, "tq2_0": slow_tq2_0}


@pytest.mark.parametrize("name", sorted(SLOW))
def test_dequantize_f64_equals_a_slow_float64_decode(name, assert_slow_decode):
    assert_slow_decode(name, SLOW[name])


@pytest.mark.parametrize("name", sorted(SLOW))
def test_float32_values_are_the_float64_values_exactly(name, samples):
    # d times -1, 0, 1 (or 2) needs no rounding, so gguf-py's float32 holds the exact value.
    fmt = get_format(name)
    blocks = samples(fmt)
    v32 = gguf.quants.dequantize(blocks, fmt.qtype)
    np.testing.assert_array_equal(v32.astype(np.float64), fmt.dequantize_f64(blocks))
    np.testing.assert_array_equal(fmt.dequantize(blocks).view(np.uint32), v32.view(np.uint32))


def test_every_code_byte_decodes_to_ternary_digits():
    tq1 = np.zeros((256, 54), dtype=np.uint8)
    tq1[:, :52] = np.arange(256, dtype=np.uint8)[:, None]
    tq1[:, 52:] = np.frombuffer(np.float16(1).tobytes(), dtype=np.uint8)
    assert set(np.unique(get_format("tq1_0").dequantize_f64(tq1))) == {-1.0, 0.0, 1.0}
    tq2 = np.zeros((256, 66), dtype=np.uint8)
    tq2[:, :64] = np.arange(256, dtype=np.uint8)[:, None]
    tq2[:, 64:] = np.frombuffer(np.float16(1).tobytes(), dtype=np.uint8)
    assert set(np.unique(get_format("tq2_0").dequantize_f64(tq2))) == {-1.0, 0.0, 1.0, 2.0}
