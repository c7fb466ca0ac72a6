"""numerics.bounds: the interval q8_1 bound holds for every perturbation it claims to cover."""
from __future__ import annotations

import numpy as np

from strata_bench.numerics.bounds import q8_1_deviation
from strata_bench.numerics.q8_1 import dequantize_q8_1, quantize_q8_1


def test_q8_1_deviation_bounds_every_perturbation():
    rng = np.random.default_rng(8)
    h = rng.standard_normal((4, 128)) * 3
    h[1, :32] = 1e-7  # a block whose amax interval reaches 0: left open
    th = np.abs(rng.standard_normal((4, 128))) * 1e-3
    ref, dev, mag = q8_1_deviation(h, th)
    assert np.array_equal(ref, dequantize_q8_1(quantize_q8_1(h.astype(np.float32))))
    for trial in range(200):
        pert = (h + th * rng.uniform(-1, 1, h.shape)).astype(np.float32)
        got = dequantize_q8_1(quantize_q8_1(pert))
        assert (np.abs(got - ref) <= dev).all() and (np.abs(got) <= mag).all(), trial
    assert np.median(dev[:, 32:]) == 0  # most codes cannot move: the bound is tight
