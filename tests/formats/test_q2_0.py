"""The engine's Q2_0: its reference against its definition, and its quantizer."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.formats import get_format


def _f16(raw: bytes) -> float:
    return float(np.frombuffer(raw, dtype=np.float16)[0])


# --- slow decoders: one element at a time, from the block layouts / ggml's C loops ----------------
def slow_q2_0(b: bytes) -> list[float]:
    d = _f16(b[0:2])
    return [d * (2 * ((b[2 + j % 16] >> (2 * (j // 16))) & 3) - 3) for j in range(64)]


SLOW = {"q2_0": slow_q2_0}


@pytest.mark.parametrize("name", sorted(SLOW))
def test_dequantize_f64_equals_a_slow_float64_decode(name, assert_slow_decode):
    assert_slow_decode(name, SLOW[name])


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
