"""The trials step without a GPU: the median's order-statistic CI, exactly, and the stop rule driven by a
fake replay and a fake clock."""
from __future__ import annotations

import math
from itertools import count

import numpy as np
import pytest

from strata_bench.timing.bench import TimingConfig
from strata_bench.timing.trials import median_ci, relative_ci, run_trials

SIXTEEN = np.array([9.1, 8.7, 9.4, 8.9, 9.0, 9.3, 8.8, 9.2, 9.6, 8.6, 9.05, 8.95, 9.15, 8.85, 9.5, 9.25])


def test_median_ci_is_the_binomial_order_statistics_of_a_fixed_sample():
    # n=16: P(X<=3) = 0.0106 and P(X<=4) = 0.0384 for X ~ B(16, 1/2), so the 95% interval runs from the
    # 4th to the 13th smallest value; at 99% from the 3rd to the 14th.
    assert median_ci(SIXTEEN) == (8.85, 9.3)
    assert median_ci(SIXTEEN, confidence=0.99) == (8.8, 9.4)
    # n=20: from the 6th to the 15th; the order the samples arrive in does not matter.
    assert median_ci(np.arange(20, 0, -1, dtype=float)) == (6.0, 15.0)


def test_median_ci_of_fewer_than_six_samples_is_their_range():
    assert median_ci(np.array([3.0, 1.0, 2.0, 5.0, 4.0])) == (1.0, 5.0)
    assert median_ci(np.array([7.0])) == (7.0, 7.0)


def test_relative_ci_is_the_half_width_over_the_median():
    assert relative_ci(list(SIXTEEN)) == pytest.approx((9.3 - 8.85) / 2 / 9.075, rel=1e-15)


class _Clock:
    """Advances by `step` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_trials_stop_as_soon_as_the_ci_is_tight_enough():
    # 2 ms for 1000 launches is 2 us per call; identical samples have a zero-width CI.
    samples, ci_rel = run_trials(lambda: 2e-3, 1000, TimingConfig(min_trials=10), clock=_Clock(0.0))
    assert samples == [2.0] * 10 and ci_rel == 0.0


def test_trials_run_to_the_budget_when_the_ci_stays_wide():
    noisy = count()
    replay = lambda: (1.0 + (next(noisy) % 2)) * 1e-3  # alternating 1 ms and 2 ms: never tight
    cfg = TimingConfig(rel_ci=0.01, budget_s=2.0, min_trials=10, max_trials=400)
    # The clock is read once for the deadline (t=0.5 -> deadline 2.5), then once per check from the 10th
    # sample: 1.0, 1.5, 2.0, 2.5 are not past it, 3.0 is, so the 14th sample is the last.
    samples, ci_rel = run_trials(replay, 1, cfg, clock=_Clock(0.5))
    assert len(samples) == 14 and samples[:4] == [1000.0, 2000.0, 1000.0, 2000.0]
    assert ci_rel == relative_ci(samples) and ci_rel > cfg.rel_ci


def test_trials_stop_at_max_trials_and_report_nan_below_min_trials():
    cfg = TimingConfig(min_trials=10, max_trials=4)
    samples, ci_rel = run_trials(lambda: 1e-3, 1, cfg, clock=_Clock(0.0))
    assert samples == [1000.0] * 4 and math.isnan(ci_rel)
    noisy = count()
    long_budget = TimingConfig(rel_ci=0.0, budget_s=1e9, min_trials=6, max_trials=9)
    samples, _ = run_trials(lambda: (1 + next(noisy) % 3) * 1e-6, 1, long_budget, clock=_Clock(0.0))
    assert len(samples) == 9
