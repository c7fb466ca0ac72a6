"""Verdicts on planted data: each test fixes a property a wrong implementation would break."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.stats.format import describe_dominance
from strata_bench.stats.criteria import Criteria
from strata_bench.stats.paired import Dominance
from strata_bench.stats.verdict import Verdict, compare, compare_samples


def _noisy(mean: float, n: int, sd: float, seed: int) -> np.ndarray:
    return mean + np.random.default_rng(seed).normal(0, sd, n)


def test_single_pair_is_undecided():
    c = compare([1.0], [2.0])
    assert c.verdict is Verdict.UNDECIDED
    assert "fewer than 2" in c.reason


def test_planted_slowdown_is_slower_and_dominant():
    a = _noisy(1.0, 20, 0.003, 3)
    b = a * 1.03
    c = compare(a, b)
    assert c.verdict is Verdict.SLOWER
    assert c.paired.rel_ci.low > 0
    assert c.dominance is Dominance.B_ABOVE
    assert describe_dominance(c.dominance) == "every run of B is above every run of A (B worse)"


def test_higher_is_better_flips_direction():
    a = _noisy(100.0, 12, 0.2, 4)
    b = a * 1.05
    up = compare(a, b, Criteria(higher_is_better=True))
    down = compare(a, b)
    assert up.verdict is Verdict.FASTER and down.verdict is Verdict.SLOWER
    assert "better" in describe_dominance(up.dominance, True)


def test_same_band_and_undecided():
    a = _noisy(1.0, 20, 0.001, 5)
    same = compare(a, a * 1.001 + _noisy(0, 20, 0.0005, 6))
    assert same.verdict is Verdict.SAME
    assert "same band" in same.reason
    wide = compare(_noisy(1.0, 4, 0.05, 7), _noisy(1.0, 4, 0.05, 8))
    assert wide.verdict is Verdict.UNDECIDED
    assert "includes 0" in wide.reason


def test_regression_needs_ci_beyond_threshold():
    a = _noisy(1.0, 20, 0.002, 9)
    crit = Criteria(fail_on_regression=0.02)
    assert compare(a, a * 1.05, crit).regression
    small = compare(a, a * 1.01, crit)
    assert not small.regression and "no regression" in small.regression_reason
    # higher is better: B lower by 5% is the regression
    assert compare(a, a * 0.95, Criteria(higher_is_better=True, fail_on_regression=0.02)).regression
    assert not compare(a, a * 0.95, crit).regression


def test_compare_samples_welch_and_single_values():
    crit = Criteria(fail_on_regression=0.05)
    r = compare_samples([1.0, 1.01, 0.99], [1.2, 1.21, 1.19], crit)
    assert r.verdict is Verdict.SLOWER and r.regression
    assert r.ratio == pytest.approx(1.2)
    single = compare_samples([1.0], [1.005], crit)
    assert single.rel_ci is None and single.verdict is Verdict.SAME
    assert "single values" in single.reason and not single.regression


def test_comparison_to_dict_is_json_ready():
    import json

    c = compare([1.0, 1.1, 1.2], [1.3, 1.4, 1.5])
    body = json.loads(json.dumps(c.to_dict()))
    assert body["verdict"] == "SLOWER" and body["dominance"] == "B_ABOVE"
