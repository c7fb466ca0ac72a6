"""Helpers shared by the format tests: sample blocks and the slow-decoder comparison."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.formats import get_format


def sample_blocks(fmt, seed: int = 3) -> np.ndarray:
    """Three seeded random blocks, then every edge-case block."""
    rng = np.random.default_rng(seed)
    return np.concatenate([fmt.random_blocks(rng, 3), fmt.edge_blocks(rng)])


@pytest.fixture
def assert_slow_decode():
    """Check a format's exact float64 values against a one-element-at-a-time decoder of its layout."""

    def check(name: str, slow) -> None:
        fmt = get_format(name)
        blocks = sample_blocks(fmt)
        exact = fmt.dequantize_f64(blocks)
        for i, block in enumerate(blocks):
            expected = np.array(slow(bytes(block)), dtype=np.float64)
            np.testing.assert_array_equal(exact[i], expected, err_msg=f"{name} block {i}")

    return check


@pytest.fixture
def samples():
    return sample_blocks
