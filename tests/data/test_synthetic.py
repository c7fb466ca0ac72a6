"""Synthetic data: seeded weights (edge blocks first where asked) and seeded activations."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.data.synthetic import seeded_activations, synthetic_weights
from strata_bench.errors import InputError
from strata_bench.formats import get_format

def test_synthetic_weights_are_deterministic_and_shaped():
    raw = synthetic_weights("iq2_xxs", 8, 512, seed=1)
    assert raw.shape == (8, 2 * 66) and raw.dtype == np.uint8
    np.testing.assert_array_equal(raw, synthetic_weights("iq2_xxs", 8, 512, seed=1))
    assert not np.array_equal(raw, synthetic_weights("iq2_xxs", 8, 512, seed=2))


def test_edge_blocks_come_first_and_the_random_blocks_follow_unchanged():
    fmt = get_format("q4_k")
    plain = fmt.blocks(synthetic_weights(fmt, 4, 4096, seed=3))
    edged = fmt.blocks(synthetic_weights(fmt, 4, 4096, seed=3, edge=True))
    n_edge = len(fmt.edge_blocks(np.random.default_rng(0)))
    assert fmt.scale_values(edged[3])["d"][0] == 65504  # 4th edge case: the largest finite scale
    assert np.abs(fmt.dequantize_f64(edged[0])).max() == 0  # first: zero scale
    np.testing.assert_array_equal(edged[n_edge:], plain[n_edge:])
    assert not np.array_equal(edged[:n_edge], plain[:n_edge])
    np.testing.assert_array_equal(edged, fmt.blocks(synthetic_weights(fmt, 4, 4096, seed=3, edge=True)))


def test_synthetic_bad_shapes_are_input_errors():
    with pytest.raises(InputError, match="100"):
        synthetic_weights("q8_0", 4, 100, seed=0)
    with pytest.raises(InputError, match="row count 0"):
        synthetic_weights("q8_0", 0, 64, seed=0)


def test_seeded_activations():
    acts = seeded_activations(4, (2, 64))
    assert acts.dtype == np.float32 and acts.shape == (2, 64)
    np.testing.assert_array_equal(acts, seeded_activations(4, (2, 64)))
    assert 0.7 < acts.std() < 1.3
