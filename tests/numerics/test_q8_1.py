"""numerics.q8_1: host q8_1 blocks against a scalar mirror of the device's quantize_q8_1_lane."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from strata_bench.numerics.q8_1 import butterfly_sum_f32, dequantize_q8_1, quantize_q8_1, unpack_q8_1


def _slow_q8_1(block: np.ndarray) -> tuple[float, list[int]]:
    amax = max(abs(float(v)) for v in block)
    d = np.float32(np.float32(amax) / np.float32(127))
    qs = []
    for v in block:
        if amax == 0:
            qs.append(0)
            continue
        r = Fraction(float(np.float32(v) / d))  # the fp32 quotient, then C's roundf exactly
        qs.append(int(math.copysign(math.floor(abs(r) + Fraction(1, 2)), r)))
    return float(np.float16(d)), qs


def test_quantize_q8_1_matches_a_scalar_mirror_of_the_device_code():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 64), dtype=np.float32)
    x[1, :32] = 0.0
    x[2, 40] = 3e4
    raw = quantize_q8_1(x)
    d, s, q = unpack_q8_1(raw)
    for row in range(3):
        for b in range(2):
            dd, qq = _slow_q8_1(x[row, 32 * b: 32 * b + 32])
            assert d[row, b] == dd and q[row, b].tolist() == qq
            assert s[row, b] == float(np.float16(butterfly_sum_f32(x[row, 32 * b: 32 * b + 32])))
    assert np.all(q[1, 0] == 0) and d[1, 0] == 0.0
    assert np.array_equal(dequantize_q8_1(raw)[0, :32], d[0, 0] * q[0, 0])


def test_butterfly_sum_is_the_xor_tree():
    x = np.arange(32, dtype=np.float32) * np.float32(0.1)
    lanes = list(x)
    for off in (16, 8, 4, 2, 1):
        lanes = [np.float32(lanes[i] + lanes[i ^ off]) for i in range(32)]
    assert butterfly_sum_f32(x) == lanes[0]
