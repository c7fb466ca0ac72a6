"""NEW/OLD of independent samples, the Benjamini-Hochberg step and the geometric mean, exactly."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from strata_bench.stats.ratio import LINEAR_METHOD, LOG_METHOD, benjamini_hochberg, geometric_mean, sample_ratio


def test_ratio_is_the_ratio_of_geometric_means_with_welch_on_logs():
    old = [10.0, 10.1, 9.9, 10.05, 9.95]
    new = [v * 1.05 for v in old]  # every value 5% slower: the log shift is exactly log(1.05)
    r = sample_ratio(old, new)
    assert r.ratio == pytest.approx(1.05, rel=1e-12) and (r.n_old, r.n_new) == (5, 5)
    test = sps.ttest_ind(np.log(new), np.log(old), equal_var=False)
    ci = test.confidence_interval(0.95)
    assert (r.ci.low, r.ci.high) == pytest.approx((math.exp(ci.low), math.exp(ci.high)), rel=1e-12)
    assert r.p == pytest.approx(test.pvalue, rel=1e-12) and r.ci.method == LOG_METHOD
    assert r.rel_ci.low == pytest.approx(r.ci.low - 1) and r.ci.low > 1


def test_no_spread_is_exact_and_single_values_have_no_interval():
    same = sample_ratio([2.0, 2.0], [2.0, 2.0])
    assert (same.ratio, same.ci.low, same.ci.high, same.p) == (1.0, 1.0, 1.0, 1.0)
    moved = sample_ratio([2.0, 2.0], [3.0, 3.0])
    assert moved.ratio == pytest.approx(1.5) and moved.p == 0.0
    single = sample_ratio([10.0], [11.0, 11.0])
    assert single.ci is None and single.p is None and single.ratio == pytest.approx(1.1)
    with pytest.raises(ValueError, match="at least one value"):
        sample_ratio([], [1.0])


def test_values_at_or_below_zero_fall_back_to_welch_over_the_mean():
    r = sample_ratio([0.0, 2.0], [1.0, 3.0])
    assert r.ratio == pytest.approx(2.0) and r.ci.method == LINEAR_METHOD
    diff = sps.ttest_ind([1.0, 3.0], [0.0, 2.0], equal_var=False).confidence_interval(0.95)
    assert (r.ci.low, r.ci.high) == pytest.approx((1 + diff.low, 1 + diff.high))


def test_benjamini_hochberg_exact():
    # sorted 0.01 0.03 0.04 0.2 (m=4): p*m/rank = 0.04 0.06 0.0533 0.2; the running minimum from the top
    # gives 0.04 0.0533 0.0533 0.2, returned in the order given.
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert benjamini_hochberg([0.5]) == [0.5] and benjamini_hochberg([]) == []
    assert benjamini_hochberg([0.9, 0.95]) == pytest.approx([0.95, 0.95])


def test_geometric_mean_and_its_interval_over_cases():
    g = geometric_mean([1.0, 1.21])
    assert g.value == pytest.approx(1.1) and g.n == 2
    half = sps.t.ppf(0.975, 1) * math.log(1.1)  # the log ratios' sd/sqrt(2) is log(1.1) here
    assert (g.ci.low, g.ci.high) == pytest.approx((1.1 * math.exp(-half), 1.1 * math.exp(half)))
    assert geometric_mean([1.2]).ci is None and geometric_mean([1.1, 1.1]).ci.low == pytest.approx(1.1)
    assert geometric_mean([math.nan, 0.0]) is None
