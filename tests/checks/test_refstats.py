"""checks/refstats.py: a reference's statistics, as the whole-array passes computed them."""
from __future__ import annotations

import json

import numpy as np
import pytest

from strata_bench.cases import Expected
from strata_bench.checks.refstats import RefStats, reference_stats


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_the_statistics_are_the_whole_arrays_in_its_own_layout(layout):
    rng = np.random.default_rng(4)
    base = rng.standard_normal((300, 701)) * 10.0 ** rng.integers(-6, 6, (300, 701))
    ref = {"C": base, "F": np.asfortranarray(base), "strided": base[:, ::3]}[layout]
    stats = reference_stats(Expected("y", ref, np.abs(ref) * 1e-3, "t"), piece=1 << 12)
    assert stats.denom == np.sum(np.square(ref))  # np.square lays its result out as ref: the same sum
    assert (stats.all_finite, stats.max_ref, stats.largest_bound) == \
        (True, float(np.abs(ref).max()), float((np.abs(ref) * 1e-3).max()))


def test_non_finite_elements_count_as_zero_and_round_trip_through_json():
    ref = np.array([[1.0, np.nan, -4.0], [np.inf, 2.0, -np.inf]])
    stats = reference_stats(Expected("y", ref, 0.5, "t"))
    assert stats == RefStats(False, 4.0, 21.0, 0.5)
    assert RefStats.from_json(json.loads(json.dumps(stats.to_json()))) == stats
    assert reference_stats(Expected("y", np.empty((0, 3)), np.empty((0, 3)), "t")) == RefStats(True, 0.0, 0.0, 0.0)
