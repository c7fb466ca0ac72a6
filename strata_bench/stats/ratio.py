"""NEW against OLD as two independent samples: the ratio with its interval and p-value, the
Benjamini-Hochberg step across many cases, and the geometric mean of many ratios.

Times are positive and their noise is multiplicative, so a ratio is judged on log scale: Welch's t
test of log(NEW) against log(OLD) (scipy.stats.ttest_ind, equal_var=False) gives the ratio of the
geometric means, exp() of its interval, and a p-value for "no change". Samples with a value <= 0
(a metric that can be zero) fall back to Welch on the values themselves, divided by mean(OLD).
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

from strata_bench.stats.intervals import Interval

LOG_METHOD = "welch t on log values"
LINEAR_METHOD = "welch t / mean(OLD)"


@dataclass(frozen=True)
class RatioEstimate:
    """NEW/OLD with its interval (on the ratio, so 1 is "no change") and the two-sided p-value of
    "no change"; `ci` and `p` are None with fewer than 2 values on a side."""

    n_old: int
    n_new: int
    ratio: float
    ci: Interval | None
    p: float | None

    @property
    def rel_ci(self) -> Interval | None:
        """The interval as a relative change (ratio - 1): [-0.02, +0.01] is -2% to +1%."""
        return None if self.ci is None else Interval(self.ci.low - 1, self.ci.high - 1, self.ci.method)


def sample_ratio(old: Sequence[float], new: Sequence[float], confidence: float = 0.95) -> RatioEstimate:
    """NEW/OLD of two independent samples (see the module docstring for the method)."""
    xo, xn = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    if xo.size == 0 or xn.size == 0:
        raise ValueError("sample_ratio needs at least one value on each side")
    positive = bool((xo > 0).all() and (xn > 0).all())
    if xo.size < 2 or xn.size < 2:
        ratio = _gmean(xn) / _gmean(xo) if positive else _mean_ratio(xo, xn)
        return RatioEstimate(int(xo.size), int(xn.size), ratio, None, None)
    if positive:
        diff, low, high, p = _welch(np.log(xo), np.log(xn), confidence)
        ci = Interval(math.exp(low), math.exp(high), LOG_METHOD)
        return RatioEstimate(int(xo.size), int(xn.size), math.exp(diff), ci, p)
    mean_old = float(xo.mean())
    diff, low, high, p = _welch(xo, xn, confidence)
    if mean_old == 0:
        return RatioEstimate(int(xo.size), int(xn.size), math.nan, None, p)
    lo, hi = sorted((1 + low / mean_old, 1 + high / mean_old))
    return RatioEstimate(int(xo.size), int(xn.size), 1 + diff / mean_old, Interval(lo, hi, LINEAR_METHOD), p)


def _gmean(x: np.ndarray) -> float:
    return float(x[0]) if x.size == 1 else float(np.exp(np.log(x).mean()))


def _mean_ratio(xo: np.ndarray, xn: np.ndarray) -> float:
    mean_old = float(xo.mean())
    return float(xn.mean()) / mean_old if mean_old else math.nan


def _welch(xo: np.ndarray, xn: np.ndarray, confidence: float) -> tuple[float, float, float, float]:
    """mean(new) - mean(old), its Welch interval and p-value. With no spread on either side scipy gives
    NaN; the difference is then exact: a zero-width interval, p = 1 for no change and 0 for any change."""
    diff = float(xn.mean() - xo.mean())
    if np.ptp(xo) == 0 and np.ptp(xn) == 0:
        return diff, diff, diff, 1.0 if diff == 0 else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nearly equal values warn of precision loss; the result stands
        test = sps.ttest_ind(xn, xo, equal_var=False)
        ci = test.confidence_interval(confidence)
    return diff, float(ci.low), float(ci.high), float(test.pvalue)


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the order given
    (scipy.stats.false_discovery_control): a case is a discovery at false discovery rate alpha
    when its q <= alpha."""
    if len(pvalues) == 0:
        return []
    return [float(q) for q in sps.false_discovery_control(np.asarray(pvalues, dtype=float), method="bh")]


@dataclass(frozen=True)
class GeometricMean:
    """The geometric mean of n ratios and, with 2+ ratios, the t interval of the mean log ratio: how
    far the typical case moved, its spread over cases (not the noise within one case)."""

    value: float
    ci: Interval | None
    n: int


def geometric_mean(ratios: Sequence[float], confidence: float = 0.95) -> GeometricMean | None:
    """None when there is no positive, finite ratio to average."""
    logs = np.log([r for r in ratios if math.isfinite(r) and r > 0])
    if logs.size == 0:
        return None
    value = float(np.exp(logs.mean()))
    if logs.size < 2:
        return GeometricMean(value, None, 1)
    if np.ptp(logs) == 0:
        return GeometricMean(value, Interval(value, value, "t on log ratios"), int(logs.size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ci = sps.ttest_1samp(logs, 0.0).confidence_interval(confidence)
    return GeometricMean(value, Interval(math.exp(ci.low), math.exp(ci.high), "t on log ratios"), int(logs.size))
