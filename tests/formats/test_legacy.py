"""Legacy formats: exact float64 values against slow decoders of the layouts."""
from __future__ import annotations

import struct

import gguf
import numpy as np
import pytest


def _f16(raw: bytes) -> float:
    return float(np.frombuffer(raw, dtype=np.float16)[0])


# --- slow decoders: one element at a time, from the block layouts / ggml's C loops ----------------
def slow_q8_0(b: bytes) -> list[float]:
    d = _f16(b[0:2])
    return [d * struct.unpack("b", b[2 + j:3 + j])[0] for j in range(32)]


def slow_q4_1(b: bytes) -> list[float]:
    d, m = _f16(b[0:2]), _f16(b[2:4])
    return [d * ((b[4 + j % 16] >> (4 * (j // 16))) & 15) + m for j in range(32)]


def slow_q5_1(b: bytes) -> list[float]:
    d, m, qh, qs = _f16(b[0:2]), _f16(b[2:4]), struct.unpack("<I", b[4:8])[0], b[8:]
    # Element j: nibble j % 16 (low for j < 16, high after), fifth bit j of qh.
    return [d * (((qs[j % 16] >> (4 * (j // 16))) & 15) | ((qh >> j) & 1) << 4) + m for j in range(32)]


SLOW = {"q8_0": slow_q8_0, "q4_1": slow_q4_1, "q5_1": slow_q5_1}


@pytest.mark.parametrize("name", sorted(SLOW))
def test_dequantize_f64_equals_a_slow_float64_decode(name, assert_slow_decode):
    assert_slow_decode(name, SLOW[name])


def test_q5_1_quantizes_with_gguf_py_and_round_trips_its_own_blocks():
    from strata_bench.formats import get_format

    fmt = get_format("q5_1")
    assert fmt.can_quantize()
    values = np.random.default_rng(4).standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_array_equal(fmt.quantize(values), gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q5_1))
