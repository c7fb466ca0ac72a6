"""Robust paired statistics: Hodges-Lehmann with the exact signed-rank interval, the position effect,
pairs needed to decide, Theil-Sen drift, and the simulation the verdict rule must pass."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from strata_bench.stats.criteria import Criteria
from strata_bench.stats.robust import (hodges_lehmann, pairs_to_decide, position_effect, shift,
                                       signed_rank_order, walsh_averages)
from strata_bench.stats.verdict import Verdict, compare, decide


def test_signed_rank_order_matches_the_published_table():
    # Two-sided 5% critical values of T (reject when T <= c): n=6: 0, n=10: 8, n=20: 52; k = c + 1.
    assert [signed_rank_order(n, 0.95) for n in (5, 6, 10, 20)] == [0, 1, 9, 53]


def test_interval_ends_are_where_scipy_wilcoxon_turns_significant():
    d = np.random.default_rng(1).normal(0.02, 0.01, 15)
    est, ci = hodges_lehmann(d)
    assert ci.method == "Hodges-Lehmann, signed rank"
    assert est == pytest.approx(np.median(walsh_averages(d)))
    eps = 1e-9
    for inside in (ci.low + eps, ci.high - eps, est):
        assert sps.wilcoxon(d - inside, method="exact").pvalue >= 0.05
    for outside in (ci.low - 1e-4, ci.high + 1e-4):
        assert sps.wilcoxon(d - outside, method="exact").pvalue < 0.05


def test_few_pairs_fall_back_to_t_and_say_so():
    est, ci = hodges_lehmann([0.1, 0.2, 0.3])
    assert est == pytest.approx(0.2) and ci.method == "t (fewer than 6 pairs)"


def test_shift_is_a_ratio_robust_to_one_slow_run():
    rng = np.random.default_rng(2)
    a = np.full(12, 100.0) * np.exp(rng.normal(0, 0.002, 12))
    b = a * 1.03 * np.exp(rng.normal(0, 0.002, 12))
    b[4] *= 1.25  # one slow run
    s, d = shift(a, b)
    assert s.scale == "log ratio" and s.estimate == pytest.approx(0.03, abs=2e-3)
    assert 0.02 < s.interval.low < 0.03 < s.interval.high < 0.04
    assert d[4] == pytest.approx(math.log(b[4] / a[4]))
    mean_based = compare(a, b).paired.rel_ci  # the t interval is dragged and widened by the slow run
    assert mean_based.high - mean_based.low > 5 * (s.interval.high - s.interval.low)


def test_position_effect_of_a_planted_second_run_penalty():
    rng = np.random.default_rng(3)
    a_first = [p % 2 == 0 for p in range(20)]
    # The second run of each pair is 1% slower: d = +1% when A ran first (B second), -1% otherwise.
    d = np.array([0.01 if f else -0.01 for f in a_first]) + rng.normal(0, 0.001, 20)
    pe = position_effect(d, a_first)
    assert pe.position == pytest.approx(0.01, abs=1e-3) and pe.p < 1e-6 and (pe.a_first, pe.b_first) == (10, 10)
    assert position_effect(d[:3], a_first[:3]) is None


def test_pairs_to_decide():
    from strata_bench.stats.intervals import Interval

    # Estimate 0 with a +/-2% interval at 10 pairs: SAME needs +/-1%, so 4x the pairs.
    assert pairs_to_decide(0.0, Interval(-0.02, 0.02, "x"), 10, 0.01) == 40
    # Estimate 3% with +/-4%: clearing 0 needs half-width 3%: 10 * (4/3)^2 -> 18.
    assert pairs_to_decide(0.03, Interval(-0.01, 0.07, "x"), 10, 0.01) == 18
    assert pairs_to_decide(0.0, None, 10, 0.01) is None


def test_undecided_says_how_many_pairs_would_decide():
    rng = np.random.default_rng(4)
    a = np.exp(rng.normal(0, 0.02, 8))
    c = compare(a, np.exp(rng.normal(0, 0.02, 8)))
    assert c.verdict is Verdict.UNDECIDED and c.pairs_needed > 8
    assert c.reason.endswith(f"(about {c.pairs_needed} pairs would decide at this spread)")


def test_theil_sen_drift_ignores_one_wild_pair():
    # B - A is flat except one wild pair near the end: least squares would call that drift.
    a = np.ones(20)
    b = a + 0.001 * np.random.default_rng(5).normal(size=20)
    b[18] += 0.5
    c = compare(a, b)
    assert not c.drift.flagged
    trend = next(t for t in c.drift.trends if t.series == "B-A")
    assert trend.method == "theil-sen slope per pair" and trend.low <= 0 <= trend.high


def _simulate(planted: float, seeds: int = 400, pairs: int = 20, sd: float = 0.005) -> dict[str, dict[str, float]]:
    """Share of seeds per verdict, robust rule and mean/t rule, with 5% of runs 20% slower at random."""
    counts: dict[str, dict[str, int]] = {"robust": {}, "mean": {}}
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        a = np.exp(rng.normal(0, sd, pairs))
        b = np.exp(rng.normal(0, sd, pairs)) * (1 + planted)
        a = np.where(rng.random(pairs) < 0.05, a * 1.2, a)
        b = np.where(rng.random(pairs) < 0.05, b * 1.2, b)
        c = compare(a, b, a_first=[p % 2 == 0 for p in range(pairs)])
        for rule, verdict in (("robust", c.verdict), ("mean", decide(c.paired.rel_ci, Criteria())[0])):
            counts[rule][verdict.value] = counts[rule].get(verdict.value, 0) + 1
    return {rule: {v: n / seeds for v, n in got.items()} for rule, got in counts.items()}


@pytest.mark.slow  # about 24 s on 2 cores: the verdicts of many simulated A/A and planted runs
def test_simulation_a_a_is_same_and_a_planted_3_percent_is_slower(capsys):
    aa, planted = _simulate(0.0), _simulate(0.03)
    with capsys.disabled():
        print(f"\nA/A robust {aa['robust']}, mean {aa['mean']}\n3% robust {planted['robust']}, mean {planted['mean']}")
    assert aa["robust"].get("SAME", 0) >= 0.85
    assert aa["robust"].get("FASTER", 0) + aa["robust"].get("SLOWER", 0) <= 0.02
    assert planted["robust"].get("SLOWER", 0) >= 0.90
    # The mean/t rule this replaced fails both (it is kept as a cross-check only).
    assert aa["mean"].get("SAME", 0) < 0.5 and planted["mean"].get("SLOWER", 0) < 0.7
