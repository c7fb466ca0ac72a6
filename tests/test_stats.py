"""Statistics on planted data: each test fixes a property a wrong implementation would break."""
from __future__ import annotations

import math

import numpy as np
import pytest

from strata_bench.stats import core as S


def _noisy(mean: float, n: int, sd: float, seed: int) -> np.ndarray:
    return mean + np.random.default_rng(seed).normal(0, sd, n)


def test_arm_stats_values():
    arm = S.arm_stats([1.0, 2.0, 3.0, 4.0])
    assert (arm.n, arm.mean, arm.median, arm.min, arm.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert arm.sd == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert arm.outliers == ()


def test_outlier_flagged_by_modified_z_not_dropped():
    values = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 14.0]
    arm = S.arm_stats(values)
    assert arm.outliers == (6,)
    assert arm.n == 7 and arm.max == 14.0  # still counted
    # 0.6745 * (14 - 10.02) / MAD by hand
    med = np.median(values)
    mad = np.median(np.abs(np.array(values) - med))
    assert S.modified_z(values)[6] == pytest.approx(0.6745 * (14.0 - med) / mad)


def test_outliers_when_mad_is_zero():
    # More than half equal: MAD is 0, the mean-absolute-deviation fallback still finds the odd one.
    assert S.outlier_positions([5.0] * 9 + [9.0]) == (9,)
    assert S.outlier_positions([5.0] * 6) == ()


def test_paired_t_interval_matches_formula():
    a = np.array([10.0, 11.0, 12.0, 13.0, 14.0])
    b = a + np.array([1.0, 2.0, 1.5, 2.5, 1.0])
    p = S.paired_stats(a, b)
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
    p1, p2 = S.paired_stats(a, b), S.paired_stats(a, b)
    assert p1.ci_boot == p2.ci_boot
    assert p1.ci_boot.low < p1.mean_diff < p1.ci_boot.high
    assert p1.ratio_ci.low < p1.ratio < p1.ratio_ci.high
    assert p1.ratio_ci.low > 1.0


def test_flat_differences_do_not_crash():
    p = S.paired_stats([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert p.wilcoxon_p == 1.0 and "zero" in p.wilcoxon_note
    assert p.ci_boot.low == p.ci_boot.high == 0.0
    c = S.compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert c.verdict is S.Verdict.SAME


def test_wilcoxon_small_n_is_noted():
    p, note = S.wilcoxon_p(np.array([1.0, 2.0, 3.0]))
    assert p == pytest.approx(0.25)
    assert "cannot fall below" in note
    assert S.wilcoxon_p(np.array([0.0, 0.0, 1.0]))[0] is None
    p, note = S.wilcoxon_p(np.arange(1.0, 11.0))
    assert p < 0.01 and note == ""


def test_single_pair_is_undecided():
    c = S.compare([1.0], [2.0])
    assert c.verdict is S.Verdict.UNDECIDED
    assert "fewer than 2" in c.reason


def test_planted_slowdown_is_slower_and_dominant():
    a = _noisy(1.0, 20, 0.003, 3)
    b = a * 1.03
    c = S.compare(a, b)
    assert c.verdict is S.Verdict.SLOWER
    assert c.paired.rel_ci.low > 0
    assert c.dominance is S.Dominance.B_ABOVE
    assert S.describe_dominance(c.dominance) == "every run of B is above every run of A (B worse)"


def test_higher_is_better_flips_direction():
    a = _noisy(100.0, 12, 0.2, 4)
    b = a * 1.05
    up = S.compare(a, b, S.Criteria(higher_is_better=True))
    down = S.compare(a, b)
    assert up.verdict is S.Verdict.FASTER and down.verdict is S.Verdict.SLOWER
    assert "better" in S.describe_dominance(up.dominance, True)


def test_same_band_and_undecided():
    a = _noisy(1.0, 20, 0.001, 5)
    same = S.compare(a, a * 1.001 + _noisy(0, 20, 0.0005, 6))
    assert same.verdict is S.Verdict.SAME
    assert "same band" in same.reason
    wide = S.compare(_noisy(1.0, 4, 0.05, 7), _noisy(1.0, 4, 0.05, 8))
    assert wide.verdict is S.Verdict.UNDECIDED
    assert "includes 0" in wide.reason


def test_regression_needs_ci_beyond_threshold():
    a = _noisy(1.0, 20, 0.002, 9)
    crit = S.Criteria(fail_on_regression=0.02)
    assert S.compare(a, a * 1.05, crit).regression
    small = S.compare(a, a * 1.01, crit)
    assert not small.regression and "no regression" in small.regression_reason
    # higher is better: B lower by 5% is the regression
    assert S.compare(a, a * 0.95, S.Criteria(higher_is_better=True, fail_on_regression=0.02)).regression
    assert not S.compare(a, a * 0.95, crit).regression


def test_drift_in_differences_is_flagged_but_common_drift_is_only_noted():
    n = 20
    trend = np.linspace(0, 0.2, n)
    a = 1.0 + trend + _noisy(0, n, 0.001, 10)
    b = a + 0.01
    common = S.compare(a, b)
    assert not common.drift.flagged
    assert "A trends up" in common.drift.note
    growing = S.compare(np.ones(n) + _noisy(0, n, 0.001, 11), 1.0 + trend)
    assert growing.drift.flagged
    assert "B-A drifts" in growing.drift.note
    # Significant but tiny (0.01% of the mean over the whole run): noted, not flagged.
    creep = S.compare(np.ones(n), 1.0 + np.linspace(0, 1e-4, n) + _noisy(0, n, 1e-6, 12))
    assert not creep.drift.flagged and "within the same band" in creep.drift.note


def test_dominance_and_overlap():
    assert S.dominance([1, 2], [3, 4]) is S.Dominance.B_ABOVE
    assert S.dominance([3, 4], [1, 2]) is S.Dominance.B_BELOW
    assert S.dominance([1, 3], [2, 4]) is S.Dominance.OVERLAP
    assert S.describe_dominance(S.Dominance.B_BELOW) == "every run of B is below every run of A (B better)"


def test_format_diff_like_the_pull_request_text():
    a = np.array([4.9, 4.88, 4.91, 4.87, 4.9])
    b = a - np.array([0.19, 0.2, 0.195, 0.198, 0.194])
    text = S.format_diff(S.paired_stats(a, b), "s")
    assert text.startswith("-195.4 +/- ") and text.endswith(" ms (-4.0%)")
    assert S.format_value(0.0123, "s") == "12.3 ms"
    assert S.format_value(42.0, "tok/s") == "42 tok/s"
    assert S.format_mean_sd(S.arm_stats([1.0, 1.0]), "") == "1.00 +/- 0.00"


def test_compare_samples_welch_and_single_values():
    crit = S.Criteria(fail_on_regression=0.05)
    r = S.compare_samples([1.0, 1.01, 0.99], [1.2, 1.21, 1.19], crit)
    assert r.verdict is S.Verdict.SLOWER and r.regression
    assert r.ratio == pytest.approx(1.2)
    single = S.compare_samples([1.0], [1.005], crit)
    assert single.rel_ci is None and single.verdict is S.Verdict.SAME
    assert "single values" in single.reason and not single.regression


def test_comparison_to_dict_is_json_ready():
    import json

    c = S.compare([1.0, 1.1, 1.2], [1.3, 1.4, 1.5])
    body = json.loads(json.dumps(c.to_dict()))
    assert body["verdict"] == "SLOWER" and body["dominance"] == "B_ABOVE"
