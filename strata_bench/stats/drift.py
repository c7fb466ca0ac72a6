"""Trends over run order: Kendall's tau per arm, the Theil-Sen slope of B - A over pairs (robust to a
single slow run, which pulls a least-squares slope)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

DRIFT_ALPHA = 0.05


@dataclass(frozen=True)
class Trend:
    """A monotone trend over run order: Kendall's tau for an arm, a least-squares slope for B - A."""

    series: str  # "A", "B" or "B-A"
    method: str  # "kendall tau" or "theil-sen slope per pair"
    statistic: float
    p: float | None  # Kendall's tau; None for the Theil-Sen slope, which has an interval instead
    low: float | None = None  # Theil-Sen: 95% interval of the slope
    high: float | None = None

    @property
    def significant(self) -> bool:
        if self.low is not None and self.high is not None:
            return self.low > 0 or self.high < 0
        return self.p is not None and self.p < DRIFT_ALPHA


@dataclass(frozen=True)
class Drift:
    """The trends found, whether the paired difference itself drifts, and a sentence saying so."""

    trends: tuple[Trend, ...]
    flagged: bool  # the paired difference itself trends (ABBA cannot cancel that)
    note: str


def drift(a_values: Sequence[float], a_order: Sequence[int], b_values: Sequence[float],
          b_order: Sequence[int], diffs: Sequence[float], tolerance: float = 0.0) -> Drift:
    """Trends over run order. A trend common to both arms is cancelled by ABBA pairing and only
    noted. A trend in B - A (Theil-Sen slope over pair index) is flagged when its 95% interval excludes 0
    and moves the difference by more than `tolerance` (same units) from first pair to last; a
    significant but smaller one is only noted, so a microsecond creep does not raise an alarm."""
    trends = [t for t in (_kendall("A", a_order, a_values), _kendall("B", b_order, b_values),
                          _slope("B-A", diffs)) if t is not None]
    notes = []
    flagged = False
    for trend in trends:
        if not trend.significant:
            continue
        if trend.series == "B-A":
            total = abs(trend.statistic) * max(len(diffs) - 1, 1)
            big = total > tolerance
            flagged = flagged or big
            notes.append(f"B-A drifts over the run (Theil-Sen slope {trend.statistic:+.3g} per pair, 95% CI "
                         f"[{trend.low:+.3g}, {trend.high:+.3g}]"
                         + ("" if big else f"; {total:.3g} in all, within the same band") + ")")
        else:
            way = "up" if trend.statistic > 0 else "down"
            notes.append(f"{trend.series} trends {way} over the run (tau={trend.statistic:+.2f}, p={trend.p:.3g})")
    return Drift(tuple(trends), flagged, "; ".join(notes) or "no trend over run order")


def _kendall(series: str, order: Sequence[int], values: Sequence[float]) -> Trend | None:
    if len(values) < 3 or np.ptp(np.asarray(values, dtype=float)) == 0:
        return None
    result = sps.kendalltau(order, values)
    return Trend(series, "kendall tau", float(result.statistic), _finite(result.pvalue))


def _slope(series: str, diffs: Sequence[float]) -> Trend | None:
    y = np.asarray(diffs, dtype=float)
    if y.size < 3 or np.ptp(y) == 0:
        return None
    fit = sps.theilslopes(y, np.arange(y.size), alpha=1 - DRIFT_ALPHA)
    return Trend(series, "theil-sen slope per pair", float(fit.slope), None, float(fit.low_slope),
                 float(fit.high_slope))


def _finite(p: float) -> float | None:
    p = float(p)
    return p if math.isfinite(p) else None
