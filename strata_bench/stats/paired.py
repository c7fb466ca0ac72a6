"""Matched pairs (A, B): the robust shift of B against A (Hodges-Lehmann on log(B/A), exact signed-rank
interval: what the verdict reads), differences B - A with t and bootstrap intervals as a cross-check,
the ratio of means, the Wilcoxon signed-rank test, the position effect, outlying pairs, and whether
one arm's runs lie wholly above the other's."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

import numpy as np
from scipy import stats as sps

from strata_bench.stats.criteria import Criteria
from strata_bench.stats.intervals import Interval, bootstrap_interval, t_interval
from strata_bench.stats.robust import PositionEffect, position_effect, shift
from strata_bench.stats.samples import outlier_positions


@dataclass(frozen=True)
class PairedStats:
    """Differences B - A over complete pairs."""

    n: int
    mean_a: float
    mean_diff: float
    sd_diff: float
    median_diff: float
    ci_t: Interval | None
    ci_boot: Interval | None
    rel_diff: float  # mean_diff / mean_a
    rel_ci: Interval | None  # ci_t / mean_a: the mean-based cross-check
    ratio: float  # mean(B) / mean(A)
    ratio_ci: Interval | None  # bootstrap over pairs
    median_ratio: float  # median over pairs of B / A (robust to one slow pair)
    wilcoxon_p: float | None
    wilcoxon_note: str
    shift: float = math.nan  # Hodges-Lehmann shift of B against A, relative (+0.03: B 3% above A)
    shift_ci: Interval | None = None  # its exact signed-rank interval, relative: what the verdict reads
    shift_scale: str = ""  # "log ratio" or "difference / mean(A)"
    position: PositionEffect | None = None  # 2x2 crossover period effect (ABBA)
    pair_outliers: tuple[int, ...] = ()  # positions of pairs whose d is an outlier (flagged, kept)


class Dominance(str, Enum):
    """How the two arms' values overlap."""

    B_ABOVE = "B_ABOVE"  # every B above every A
    B_BELOW = "B_BELOW"  # every B below every A
    OVERLAP = "OVERLAP"


def paired_stats(a: Sequence[float], b: Sequence[float], criteria: Criteria = Criteria(),
                 a_first: Sequence[bool] | None = None) -> PairedStats | None:
    """Paired differences B - A; None without a single complete pair. `a_first[i]` says whether A
    ran first in pair i (for the position effect; omitted, it is not estimated)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples differ in length: {xa.size} A vs {xb.size} B")
    if xa.size == 0:
        return None
    diffs = xb - xa
    mean_a = float(xa.mean())
    mean_diff = float(diffs.mean())
    ci_t = t_interval(diffs, criteria.confidence)
    rel_ci = ci_t.scaled(1 / mean_a, "t / mean(A)") if ci_t and mean_a else None
    p, note = wilcoxon_p(diffs)
    robust, d = shift(xa, xb, criteria.confidence)
    position = position_effect(d, a_first) if a_first is not None and len(a_first) == d.size else None
    return PairedStats(
        n=int(diffs.size), mean_a=mean_a, mean_diff=mean_diff,
        sd_diff=float(diffs.std(ddof=1)) if diffs.size > 1 else math.nan,
        median_diff=float(np.median(diffs)), ci_t=ci_t,
        ci_boot=bootstrap_interval((diffs,), _mean, criteria),
        rel_diff=mean_diff / mean_a if mean_a else math.nan, rel_ci=rel_ci,
        ratio=float(xb.mean()) / mean_a if mean_a else math.nan,
        ratio_ci=bootstrap_interval((xa, xb), _ratio_of_means, criteria, paired=True),
        median_ratio=float(np.median(xb / xa)) if np.all(xa != 0) else math.nan,
        wilcoxon_p=p, wilcoxon_note=note, shift=robust.estimate, shift_ci=robust.interval,
        shift_scale=robust.scale, position=position,
        pair_outliers=outlier_positions(d) if np.all(np.isfinite(d)) else ())


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def _ratio_of_means(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(b, axis=axis) / np.mean(a, axis=axis)


def wilcoxon_p(diffs: np.ndarray) -> tuple[float | None, str]:
    """Two-sided Wilcoxon signed-rank p (scipy, zeros dropped: zero_method="wilcox"), with a note
    where it is degenerate or weak."""
    diffs = np.asarray(diffs, dtype=float)
    nonzero = int(np.count_nonzero(diffs))
    if diffs.size == 0:
        return None, "no pairs"
    if nonzero == 0:
        return 1.0, "every difference is zero"
    if nonzero < 2:
        return None, "fewer than 2 nonzero differences"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = float(sps.wilcoxon(diffs, zero_method="wilcox").pvalue)
    if not math.isfinite(p):
        return None, "undefined for these differences"
    if nonzero < 6:
        # The exact two-sided test cannot go below 2 / 2**n: 0.0625 at n=5.
        return p, f"only {nonzero} nonzero differences: p cannot fall below {2 / 2 ** nonzero:.3g}"
    return p, ""


def dominance(a: Sequence[float], b: Sequence[float]) -> Dominance:
    """B_ABOVE when every B exceeds every A, B_BELOW for the reverse, else OVERLAP."""
    if len(a) == 0 or len(b) == 0:
        return Dominance.OVERLAP
    if min(b) > max(a):
        return Dominance.B_ABOVE
    if max(b) < min(a):
        return Dominance.B_BELOW
    return Dominance.OVERLAP
