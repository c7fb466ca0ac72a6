"""Drift over run order: a trend in B - A is flagged, a trend common to both arms only noted."""
from __future__ import annotations

import numpy as np

from strata_bench.stats.verdict import compare


def _noisy(mean: float, n: int, sd: float, seed: int) -> np.ndarray:
    return mean + np.random.default_rng(seed).normal(0, sd, n)


def test_drift_in_differences_is_flagged_but_common_drift_is_only_noted():
    n = 20
    trend = np.linspace(0, 0.2, n)
    a = 1.0 + trend + _noisy(0, n, 0.001, 10)
    b = a + 0.01
    common = compare(a, b)
    assert not common.drift.flagged
    assert "A trends up" in common.drift.note
    growing = compare(np.ones(n) + _noisy(0, n, 0.001, 11), 1.0 + trend)
    assert growing.drift.flagged
    assert "B-A drifts" in growing.drift.note
    # Significant but tiny (0.01% of the mean over the whole run): noted, not flagged.
    creep = compare(np.ones(n), 1.0 + np.linspace(0, 1e-4, n) + _noisy(0, n, 1e-6, 12))
    assert not creep.drift.flagged and "within the same band" in creep.drift.note
