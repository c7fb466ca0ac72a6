"""Robust paired statistics: the Hodges-Lehmann shift with its exact signed-rank interval, the
position (period) effect of a 2x2 crossover, and how many pairs would decide an open question.

The shift is computed on d = log(B / A) per pair, so it reads as a ratio: exp(shift) - 1 is "B is
x% slower". A few slow runs move one or two d's far out; the median of the Walsh averages hardly
moves, where the mean and its t interval are dragged and widened (STATS.md: with 5% of runs 20% slow
and 20 pairs, an A/A run is judged SAME 13% of the time by the t rule).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

from strata_bench.stats.intervals import Interval, t_interval

# Below this many pairs the exact two-sided signed-rank test cannot reach p < 0.05 (2 / 2**5 = 0.0625),
# so no 95% interval exists; the t interval is used instead and the method says so.
MIN_SIGNED_RANK_PAIRS = 6


@dataclass(frozen=True)
class Shift:
    """The Hodges-Lehmann estimate of B against A, relative (exp(shift) - 1), and its interval."""

    estimate: float  # relative: +0.03 is B 3% above A
    interval: Interval | None  # relative
    scale: str  # "log ratio" (all values positive) or "difference / mean(A)"


@dataclass(frozen=True)
class PositionEffect:
    """2x2 crossover: d = effect + position * s, s = +1 when A ran first in its pair, -1 when B did.
    `position` is half the mean difference between the two orders: how much running second adds."""

    position: float  # on the shift's scale (log ratio, or difference / mean(A))
    t: float | None
    p: float | None
    a_first: int
    b_first: int


def walsh_averages(d: np.ndarray) -> np.ndarray:
    """(d_i + d_j) / 2 for every i <= j, sorted."""
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2)


@functools.lru_cache(maxsize=256)
def signed_rank_null(n: int) -> np.ndarray:
    """P(T+ = t) for t = 0..n(n+1)/2 under the null: the exact signed-rank distribution (no ties)."""
    dist = np.zeros(n * (n + 1) // 2 + 1)
    dist[0] = 1.0
    for rank in range(1, n + 1):
        # Each rank is in the positive set or not with probability 1/2.
        shifted = np.zeros_like(dist)
        shifted[rank:] = dist[:-rank]
        dist = (dist + shifted) / 2
    return dist


def signed_rank_order(n: int, confidence: float) -> int:
    """k such that [W_(k), W_(M+1-k)] (1-based) is the exact signed-rank interval: the largest k with
    P(T+ <= k - 1) <= alpha / 2. 0 when no interval at that confidence exists."""
    cdf = np.cumsum(signed_rank_null(n))
    alpha = 1 - confidence
    return int(np.searchsorted(cdf, alpha / 2 + 1e-12, side="right"))


def hodges_lehmann(d: Sequence[float], confidence: float = 0.95) -> tuple[float, Interval | None]:
    """Median of the Walsh averages and the exact signed-rank interval; with fewer than
    MIN_SIGNED_RANK_PAIRS values, the t interval (labelled so); None with fewer than 2."""
    x = np.asarray(d, dtype=float)
    if x.size == 0:
        return math.nan, None
    walsh = walsh_averages(x)
    estimate = float(np.median(walsh))
    k = signed_rank_order(x.size, confidence)
    if x.size < MIN_SIGNED_RANK_PAIRS or k < 1:
        ci = t_interval(x, confidence)
        return estimate, (Interval(ci.low, ci.high, f"t (fewer than {MIN_SIGNED_RANK_PAIRS} pairs)") if ci else None)
    return estimate, Interval(float(walsh[k - 1]), float(walsh[walsh.size - k]), "Hodges-Lehmann, signed rank")


def shift(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> tuple[Shift, np.ndarray]:
    """B against A per pair as a relative shift; also returns the per-pair d it was computed on."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size and np.all(xa > 0) and np.all(xb > 0):
        d = np.log(xb / xa)
        est, ci = hodges_lehmann(d, confidence)
        rel = None if ci is None else Interval(math.expm1(ci.low), math.expm1(ci.high), ci.method + " on log(B/A)")
        return Shift(math.expm1(est) if math.isfinite(est) else est, rel, "log ratio"), d
    mean_a = float(xa.mean()) if xa.size else math.nan
    d = (xb - xa) / mean_a if mean_a else np.full(xa.shape, math.nan)
    est, ci = hodges_lehmann(d, confidence) if mean_a else (math.nan, None)
    rel = None if ci is None else Interval(ci.low, ci.high, ci.method + " on (B-A)/mean(A)")
    return Shift(est, rel, "difference / mean(A)"), d


def position_effect(d: Sequence[float], a_first: Sequence[bool]) -> PositionEffect | None:
    """The period effect of an ABBA (2x2 crossover) run; None unless both orders have 2+ pairs."""
    x = np.asarray(d, dtype=float)
    s = np.where(np.asarray(a_first, dtype=bool), 1.0, -1.0)
    n_ab, n_ba = int((s > 0).sum()), int((s < 0).sum())
    if x.size != s.size or n_ab < 2 or n_ba < 2:
        return None
    if np.ptp(x) == 0:
        return PositionEffect(0.0, None, None, n_ab, n_ba)
    fit = sps.linregress(s, x)
    t = fit.slope / fit.stderr if fit.stderr else None
    p = float(fit.pvalue) if math.isfinite(fit.pvalue) else None
    return PositionEffect(float(fit.slope), None if t is None else float(t), p, n_ab, n_ba)


def pairs_to_decide(estimate: float, interval: Interval | None, n: int, band: float) -> int | None:
    """Roughly how many pairs would decide, if the spread stays as observed: the interval narrows as
    1/sqrt(n) until it either fits inside +/-band (SAME) or clears 0 (a difference), whichever needs
    fewer. None when it cannot be said (no interval, no spread)."""
    if interval is None or n < 2 or not math.isfinite(estimate):
        return None
    half = (interval.high - interval.low) / 2
    if half <= 0:
        return None
    targets = [t for t in (band - abs(estimate), abs(estimate)) if t > 0]
    if not targets:
        return None
    return int(math.ceil(n * (half / max(targets)) ** 2))
