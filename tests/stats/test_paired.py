"""Paired statistics on planted data: t and bootstrap intervals, Wilcoxon, dominance."""
from __future__ import annotations

import math

import numpy as np
import pytest

from strata_bench.stats.format import describe_dominance
from strata_bench.stats.paired import Dominance, dominance, paired_stats, wilcoxon_p
from strata_bench.stats.verdict import Verdict, compare


def _noisy(mean: float, n: int, sd: float, seed: int) -> np.ndarray:
    return mean + np.random.default_rng(seed).normal(0, sd, n)


def test_paired_t_interval_matches_formula():
    a = np.array([10.0, 11.0, 12.0, 13.0, 14.0])
    b = a + np.array([1.0, 2.0, 1.5, 2.5, 1.0])
    p = paired_stats(a, b)
    d = b - a
    half = 2.7764451051977987 * d.std(ddof=1) / math.sqrt(5)  # t(0.975, 4)
    assert p.mean_diff == pytest.approx(1.6)
    assert p.ci_t.low == pytest.approx(1.6 - half) and p.ci_t.high == pytest.approx(1.6 + half)
    assert p.rel_diff == pytest.approx(1.6 / 12.0)
    assert p.rel_ci.low == pytest.approx((1.6 - half) / 12.0)
    assert p.ratio == pytest.approx(b.mean() / a.mean())


def test_bootstrap_is_seeded_and_brackets_the_mean():
    a = _noisy(100, 20, 1, 1)
    b = a * 1.05 + _noisy(0, 20, 0.5, 2)
    p1, p2 = paired_stats(a, b), paired_stats(a, b)
    assert p1.ci_boot == p2.ci_boot
    assert p1.ci_boot.low < p1.mean_diff < p1.ci_boot.high
    assert p1.ratio_ci.low < p1.ratio < p1.ratio_ci.high
    assert p1.ratio_ci.low > 1.0


def test_flat_differences_do_not_crash():
    p = paired_stats([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert p.wilcoxon_p == 1.0 and "zero" in p.wilcoxon_note
    assert p.ci_boot.low == p.ci_boot.high == 0.0
    c = compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert c.verdict is Verdict.SAME


def test_wilcoxon_small_n_is_noted():
    p, note = wilcoxon_p(np.array([1.0, 2.0, 3.0]))
    assert p == pytest.approx(0.25)
    assert "cannot fall below" in note
    assert wilcoxon_p(np.array([0.0, 0.0, 1.0]))[0] is None
    p, note = wilcoxon_p(np.arange(1.0, 11.0))
    assert p < 0.01 and note == ""


def test_dominance_and_overlap():
    assert dominance([1, 2], [3, 4]) is Dominance.B_ABOVE
    assert dominance([3, 4], [1, 2]) is Dominance.B_BELOW
    assert dominance([1, 3], [2, 4]) is Dominance.OVERLAP
    assert describe_dominance(Dominance.B_BELOW) == "every run of B is below every run of A (B better)"
