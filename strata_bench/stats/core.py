"""Statistics for A/B runs: per-arm summaries, paired differences, a verdict with its reason.

Everything here works on plain sequences of floats, so the same code judges whole commands (wall
time or a metric read from the output) and kernel variants (us per call). B is compared with A:
a difference is always B - A and a ratio is mean(B) / mean(A).

Direction: by default lower is better (times). With `higher_is_better` (tokens/s, GB/s) the verdict
names keep their meaning from B's point of view: FASTER means "B is better", SLOWER "B is worse".

The verdict reads the 95% t interval of the paired difference divided by mean(A) (the relative
difference); the bootstrap intervals (percentile, seeded) are shown next to it as a cross-check,
not used to decide.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Sequence

import numpy as np
from scipy import stats as sps

# Iglewicz and Hoaglin's cut-off for the modified z-score.
OUTLIER_Z = 3.5
DRIFT_ALPHA = 0.05


@dataclass(frozen=True)
class Interval:
    """A confidence interval and how it was computed ("t", "bootstrap BCa", ...)."""

    low: float
    high: float
    method: str

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def excludes(self, value: float) -> bool:
        return value < self.low or value > self.high

    def scaled(self, factor: float, method: str | None = None) -> "Interval":
        low, high = sorted((self.low * factor, self.high * factor))
        return Interval(low, high, method or self.method)


@dataclass(frozen=True)
class ArmStats:
    """One arm's measured values (warm-up and failed runs excluded)."""

    n: int
    mean: float
    sd: float
    median: float
    min: float
    max: float
    outliers: tuple[int, ...]  # positions in the values given, by modified z-score; never dropped


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
    rel_ci: Interval | None  # ci_t / mean_a: what the verdict reads
    ratio: float  # mean(B) / mean(A)
    ratio_ci: Interval | None  # bootstrap over pairs
    median_ratio: float  # median over pairs of B / A (robust to one slow pair)
    wilcoxon_p: float | None
    wilcoxon_note: str


class Dominance(str, Enum):
    """How the two arms' values overlap."""

    B_ABOVE = "B_ABOVE"  # every B above every A
    B_BELOW = "B_BELOW"  # every B below every A
    OVERLAP = "OVERLAP"


@dataclass(frozen=True)
class Trend:
    """A monotone trend over run order: Kendall's tau for an arm, a least-squares slope for B - A."""

    series: str  # "A", "B" or "B-A"
    method: str  # "kendall tau" or "slope per pair"
    statistic: float
    p: float | None


@dataclass(frozen=True)
class Drift:
    trends: tuple[Trend, ...]
    flagged: bool  # the paired difference itself trends (ABBA cannot cancel that)
    note: str


class Verdict(str, Enum):
    """B compared with A. FASTER and SLOWER mean better and worse when higher is better."""

    SAME = "SAME"
    FASTER = "FASTER"
    SLOWER = "SLOWER"
    UNDECIDED = "UNDECIDED"


@dataclass(frozen=True)
class Criteria:
    """How values are judged; fractions, not percents (same_band=0.01 is +/-1%)."""

    higher_is_better: bool = False
    same_band: float = 0.01
    fail_on_regression: float | None = None
    confidence: float = 0.95
    seed: int = 0  # bootstrap resampling seed, so a report recomputed from records is identical
    n_resamples: int = 4000


@dataclass(frozen=True)
class Comparison:
    """Everything a reviewer needs to trust (or distrust) one A/B result."""

    a: ArmStats
    b: ArmStats
    paired: PairedStats | None
    dominance: Dominance
    drift: Drift
    verdict: Verdict
    reason: str
    regression: bool
    regression_reason: str
    criteria: Criteria

    def to_dict(self) -> dict[str, Any]:
        return _plain(asdict(self))


@dataclass(frozen=True)
class SampleComparison:
    """Two independent samples (OLD vs NEW results files): no pairing, Welch's t interval."""

    n_old: int
    n_new: int
    mean_old: float
    mean_new: float
    ratio: float
    rel_ci: Interval | None
    verdict: Verdict
    reason: str
    regression: bool
    regression_reason: str

    def to_dict(self) -> dict[str, Any]:
        return _plain(asdict(self))


# ---------------------------------------------------------------- per arm

def arm_stats(values: Sequence[float]) -> ArmStats:
    """n, mean, sd (n-1), median, extremes and modified-z outliers of one arm."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        nan = math.nan
        return ArmStats(0, nan, nan, nan, nan, nan, ())
    sd = float(x.std(ddof=1)) if x.size > 1 else math.nan
    return ArmStats(int(x.size), float(x.mean()), sd, float(np.median(x)), float(x.min()),
                    float(x.max()), outlier_positions(x))


def modified_z(values: Sequence[float]) -> np.ndarray:
    """0.6745 * (x - median) / MAD. With MAD = 0 (over half the values equal), fall back to the
    mean absolute deviation scaled to match (1.253314); all zeros when every value is equal."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return x
    dev = x - np.median(x)
    mad = float(np.median(np.abs(dev)))
    if mad > 0:
        return 0.6745 * dev / mad
    mean_ad = float(np.mean(np.abs(dev)))
    if mean_ad > 0:
        return dev / (1.253314 * mean_ad)
    return np.zeros_like(x)


def outlier_positions(values: Sequence[float]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(np.abs(modified_z(values)) > OUTLIER_Z))


# ---------------------------------------------------------------- paired

def paired_stats(a: Sequence[float], b: Sequence[float], criteria: Criteria = Criteria()) -> PairedStats | None:
    """Paired differences B - A; None without a single complete pair."""
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
    return PairedStats(
        n=int(diffs.size), mean_a=mean_a, mean_diff=mean_diff,
        sd_diff=float(diffs.std(ddof=1)) if diffs.size > 1 else math.nan,
        median_diff=float(np.median(diffs)), ci_t=ci_t,
        ci_boot=bootstrap_interval((diffs,), _mean, criteria),
        rel_diff=mean_diff / mean_a if mean_a else math.nan, rel_ci=rel_ci,
        ratio=float(xb.mean()) / mean_a if mean_a else math.nan,
        ratio_ci=bootstrap_interval((xa, xb), _ratio_of_means, criteria, paired=True),
        median_ratio=float(np.median(xb / xa)) if np.all(xa != 0) else math.nan,
        wilcoxon_p=p, wilcoxon_note=note)


def t_interval(x: np.ndarray, confidence: float = 0.95) -> Interval | None:
    """Student's t interval for the mean; None with fewer than 2 values."""
    if x.size < 2:
        return None
    mean = float(x.mean())
    sem = float(x.std(ddof=1)) / math.sqrt(x.size)
    half = float(sps.t.ppf(0.5 + confidence / 2, df=x.size - 1)) * sem
    return Interval(mean - half, mean + half, "t")


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def _ratio_of_means(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(b, axis=axis) / np.mean(a, axis=axis)


def bootstrap_interval(data: tuple[np.ndarray, ...], statistic, criteria: Criteria,
                       paired: bool = False) -> Interval | None:
    """Seeded percentile bootstrap interval; None with fewer than 2 values.

    Percentile, not BCa: timing noise is a tight core plus rare large outliers (a sleep that
    oversleeps, a preempted run), and BCa's jackknife acceleration is then driven by one point.
    In a simulation of 20 A/A pairs with 5% exponential outliers, BCa's 95% interval for the ratio
    of means covered 1 only 72% of the time, the percentile interval 91%, the t interval 99%.
    """
    if min(d.size for d in data) < 2:
        return None
    if all(np.ptp(d) == 0 for d in data):
        value = float(statistic(*data))  # no spread: every resample gives the same value
        return Interval(value, value, "bootstrap (no spread)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples of tiny samples warn; the NaN check covers them
        result = sps.bootstrap(data, statistic, n_resamples=criteria.n_resamples, paired=paired,
                               vectorized=True, confidence_level=criteria.confidence,
                               method="percentile", rng=np.random.default_rng(criteria.seed))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return Interval(low, high, "bootstrap percentile")


def wilcoxon_p(diffs: np.ndarray) -> tuple[float | None, str]:
    """Two-sided Wilcoxon signed-rank p, with a note where it is degenerate or weak."""
    nonzero = diffs[diffs != 0]
    if diffs.size == 0:
        return None, "no pairs"
    if nonzero.size == 0:
        return 1.0, "every difference is zero"
    if nonzero.size < 2:
        return None, "fewer than 2 nonzero differences"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = float(sps.wilcoxon(nonzero).pvalue)
    if not math.isfinite(p):
        return None, "undefined for these differences"
    if nonzero.size < 6:
        # The exact two-sided test cannot go below 2 / 2**n: 0.0625 at n=5.
        return p, f"only {nonzero.size} nonzero differences: p cannot fall below {2 / 2 ** nonzero.size:.3g}"
    return p, ""


# ---------------------------------------------------------------- dominance, drift

def dominance(a: Sequence[float], b: Sequence[float]) -> Dominance:
    if len(a) == 0 or len(b) == 0:
        return Dominance.OVERLAP
    if min(b) > max(a):
        return Dominance.B_ABOVE
    if max(b) < min(a):
        return Dominance.B_BELOW
    return Dominance.OVERLAP


def describe_dominance(dom: Dominance, higher_is_better: bool = False) -> str:
    """'every run of B is above every run of A (B worse)', or that the runs overlap."""
    if dom is Dominance.OVERLAP:
        return "the runs of A and B overlap"
    above = dom is Dominance.B_ABOVE
    better = above == higher_is_better
    side = "above" if above else "below"
    return f"every run of B is {side} every run of A (B {'better' if better else 'worse'})"


def drift(a_values: Sequence[float], a_order: Sequence[int], b_values: Sequence[float],
          b_order: Sequence[int], diffs: Sequence[float], tolerance: float = 0.0) -> Drift:
    """Trends over run order. A trend common to both arms is cancelled by ABBA pairing and only
    noted. A trend in B - A (least-squares slope over pair index) is flagged when it is significant
    and moves the difference by more than `tolerance` (same units) from first pair to last; a
    significant but smaller one is only noted, so a microsecond creep does not raise an alarm."""
    trends = [t for t in (_kendall("A", a_order, a_values), _kendall("B", b_order, b_values),
                          _slope("B-A", diffs)) if t is not None]
    notes = []
    flagged = False
    for trend in trends:
        if trend.p is None or trend.p >= DRIFT_ALPHA:
            continue
        if trend.series == "B-A":
            total = abs(trend.statistic) * max(len(diffs) - 1, 1)
            big = total > tolerance
            flagged = flagged or big
            notes.append(f"B-A drifts over the run (slope {trend.statistic:+.3g} per pair, p={trend.p:.3g}"
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
    fit = sps.linregress(np.arange(y.size), y)
    return Trend(series, "slope per pair", float(fit.slope), _finite(fit.pvalue))


def _finite(p: float) -> float | None:
    p = float(p)
    return p if math.isfinite(p) else None


# ---------------------------------------------------------------- verdict

def decide(rel_ci: Interval | None, criteria: Criteria, subject: str = "B", base: str = "A") -> tuple[Verdict, str]:
    """SAME when the relative CI lies inside +/-same_band; FASTER/SLOWER when it excludes 0;
    UNDECIDED otherwise. SAME is checked first so a tiny but resolved difference reads as SAME."""
    if rel_ci is None:
        return Verdict.UNDECIDED, "fewer than 2 complete pairs: no confidence interval"
    band = criteria.same_band
    ci = (f"{_pct(criteria.confidence, 0)} CI of {subject} vs {base} is "
          f"[{_pct(rel_ci.low)}, {_pct(rel_ci.high)}]")
    if -band <= rel_ci.low and rel_ci.high <= band:
        resolved = " (a difference is resolved, but it is smaller than the band)" if rel_ci.excludes(0) else ""
        return Verdict.SAME, f"{ci}, inside the +/-{_pct_u(band)} same band{resolved}"
    if rel_ci.excludes(0):
        verdict, better = _direction(rel_ci.low > 0, criteria)
        good = "higher" if criteria.higher_is_better else "lower"
        return verdict, f"{ci}, excluding 0: {subject} is {better} ({good} is better)"
    return Verdict.UNDECIDED, f"{ci}: it includes 0 and reaches past the +/-{_pct_u(band)} band; more pairs may decide"


def _direction(subject_higher: bool, criteria: Criteria) -> tuple[Verdict, str]:
    better = subject_higher == criteria.higher_is_better
    return (Verdict.FASTER, "better") if better else (Verdict.SLOWER, "worse")


def check_regression(rel_ci: Interval | None, criteria: Criteria, subject: str = "B") -> tuple[bool, str]:
    """Worse by more than fail_on_regression with the CI excluding that threshold."""
    limit = criteria.fail_on_regression
    if limit is None:
        return False, ""
    if rel_ci is None:
        return False, "no confidence interval: regression not judged"
    worse_bound = -rel_ci.high if criteria.higher_is_better else rel_ci.low
    if worse_bound > limit:
        return True, (f"regression: {subject} is worse by at least {_pct_u(worse_bound)} "
                      f"({rel_ci.method}), beyond {_pct_u(limit)}")
    return False, f"no regression beyond {_pct_u(limit)} ({subject} worse by at most {_pct_u(_worst(rel_ci, criteria))})"


def _worst(rel_ci: Interval, criteria: Criteria) -> float:
    return max(0.0, -rel_ci.low if criteria.higher_is_better else rel_ci.high)


def compare(a: Sequence[float], b: Sequence[float], criteria: Criteria = Criteria(), *,
            pairs: Sequence[tuple[float, float]] | None = None,
            a_order: Sequence[int] | None = None, b_order: Sequence[int] | None = None) -> Comparison:
    """Judge B against A.

    `a` and `b` are every measured value of each arm (for arm stats, dominance, outliers, drift);
    `pairs` the complete (A, B) pairs, by default `zip(a, b)`. `a_order`/`b_order` are the run
    indices of the values (default 0..n-1), used by the drift check.
    """
    pairs = list(zip(a, b)) if pairs is None else list(pairs)
    pa = [p[0] for p in pairs]
    pb = [p[1] for p in pairs]
    paired = paired_stats(pa, pb, criteria)
    rel_ci = paired.rel_ci if paired else None
    verdict, reason = decide(rel_ci, criteria)
    regressed, regression_reason = check_regression(rel_ci, criteria)
    trend = drift(a, a_order if a_order is not None else range(len(a)),
                  b, b_order if b_order is not None else range(len(b)),
                  [y - x for x, y in pairs],
                  tolerance=criteria.same_band * abs(paired.mean_a) if paired else 0.0)
    return Comparison(arm_stats(a), arm_stats(b), paired, dominance(a, b), trend, verdict, reason,
                      regressed, regression_reason, criteria)


def compare_samples(old: Sequence[float], new: Sequence[float], criteria: Criteria = Criteria()) -> SampleComparison:
    """NEW against OLD as independent samples (Welch's t interval of the difference of means,
    divided by mean(OLD)). With one value on a side there is no interval: the verdict then
    reads the bare ratio against the same band and says so."""
    xo, xn = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    if xo.size == 0 or xn.size == 0:
        raise ValueError("compare_samples needs at least one value on each side")
    mean_old, mean_new = float(xo.mean()), float(xn.mean())
    ratio = mean_new / mean_old if mean_old else math.nan
    interval = welch_interval(xo, xn, criteria.confidence)
    rel_ci = interval.scaled(1 / mean_old, "welch t / mean(OLD)") if interval and mean_old else None
    if rel_ci is not None:
        verdict, reason = decide(rel_ci, criteria, "NEW", "OLD")
        regressed, why = check_regression(rel_ci, criteria, "NEW")
    else:
        verdict, reason, regressed, why = _judge_single(ratio, criteria)
    return SampleComparison(int(xo.size), int(xn.size), mean_old, mean_new, ratio, rel_ci, verdict,
                            reason, regressed, why)


def _judge_single(ratio: float, criteria: Criteria) -> tuple[Verdict, str, bool, str]:
    """Verdict from one value per side: only the ratio against the band, without an interval."""
    rel = ratio - 1
    head = f"single values, no interval: NEW/OLD = {ratio:.4f} ({_pct(rel)})"
    if not math.isfinite(rel):
        return Verdict.UNDECIDED, head, False, ""
    if abs(rel) <= criteria.same_band:
        verdict, why = Verdict.SAME, f"{head}, inside the +/-{_pct_u(criteria.same_band)} band"
    else:
        verdict, better = _direction(rel > 0, criteria)
        why = f"{head}: NEW is {better}"
    limit = criteria.fail_on_regression
    worse = -rel if criteria.higher_is_better else rel
    if limit is None:
        return verdict, why, False, ""
    if worse > limit:
        return verdict, why, True, f"regression: NEW is worse by {_pct_u(worse)}, beyond {_pct_u(limit)}"
    return verdict, why, False, f"no regression beyond {_pct_u(limit)}"


def welch_interval(old: np.ndarray, new: np.ndarray, confidence: float = 0.95) -> Interval | None:
    """Welch's t interval for mean(new) - mean(old); None unless both sides have 2+ values."""
    if old.size < 2 or new.size < 2:
        return None
    vo, vn = old.var(ddof=1) / old.size, new.var(ddof=1) / new.size
    diff = float(new.mean() - old.mean())
    if vo + vn == 0:
        return Interval(diff, diff, "welch t")
    dof = (vo + vn) ** 2 / (vo ** 2 / (old.size - 1) + vn ** 2 / (new.size - 1))
    half = float(sps.t.ppf(0.5 + confidence / 2, dof)) * math.sqrt(vo + vn)
    return Interval(diff - half, diff + half, "welch t")


# ---------------------------------------------------------------- formatting

_TIME_SCALES = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def time_scale(magnitude: float, unit: str) -> tuple[str, float]:
    """(display unit, divisor): seconds shown as s/ms/us/ns by magnitude; other units as given."""
    if unit != "s" or not math.isfinite(magnitude) or magnitude == 0:
        return unit, 1.0
    for name, factor in _TIME_SCALES:
        if abs(magnitude) >= factor:
            return name, factor
    return _TIME_SCALES[-1]


def _decimals(spread: float) -> int:
    """Decimals that show two significant digits of the spread (7.3 -> 1, 0.23 -> 2, 45 -> 0)."""
    if not math.isfinite(spread) or spread <= 0:
        return 2
    return max(0, 1 - math.floor(math.log10(spread)))


def format_value(value: float, unit: str, spread: float | None = None) -> str:
    """'4.873 s', '195.4 ms'; precision follows the spread when given."""
    if value is None or not math.isfinite(value):
        return "n/a"
    name, factor = time_scale(value, unit)
    digits = _decimals(spread / factor) if spread else 4
    text = f"{value / factor:.{digits}f}" if spread else f"{value / factor:.4g}"
    return f"{text} {name}".rstrip()


def format_mean_sd(arm: ArmStats, unit: str) -> str:
    """'4.873 +/- 0.012 s' (mean +/- sd)."""
    if arm.n == 0:
        return "n/a"
    if not math.isfinite(arm.sd):
        return format_value(arm.mean, unit)
    name, factor = time_scale(arm.mean, unit)
    digits = _decimals(arm.sd / factor)
    return f"{arm.mean / factor:.{digits}f} +/- {arm.sd / factor:.{digits}f} {name}".rstrip()


def format_diff(paired: PairedStats | None, unit: str) -> str:
    """'-195.4 +/- 7.3 ms (-4.0%)': mean B - A +/- the 95% t half-width, and relative to mean(A)."""
    if paired is None:
        return "n/a"
    half = paired.ci_t.half_width if paired.ci_t else math.nan
    name, factor = time_scale(max(abs(paired.mean_diff), half if math.isfinite(half) else 0), unit)
    if not math.isfinite(half):
        return f"{_with_unit(f'{paired.mean_diff / factor:+.4g}', name)} ({_pct(paired.rel_diff)})"
    digits = _decimals(half / factor)
    body = f"{paired.mean_diff / factor:+.{digits}f} +/- {half / factor:.{digits}f}"
    return f"{_with_unit(body, name)} ({_pct(paired.rel_diff)})"


def format_interval(ci: Interval | None, unit: str = "", percent: bool = False) -> str:
    if ci is None:
        return "n/a"
    if percent:
        return f"[{_pct(ci.low)}, {_pct(ci.high)}]"
    name, factor = time_scale(max(abs(ci.low), abs(ci.high)), unit)
    digits = _decimals(ci.half_width / factor) if ci.half_width else 4
    return f"[{ci.low / factor:+.{digits}f}, {ci.high / factor:+.{digits}f}] {name}".rstrip()


def format_ratio(ratio: float, ci: Interval | None) -> str:
    if not math.isfinite(ratio):
        return "n/a"
    if ci is None:
        return f"{ratio:.4f}"
    return f"{ratio:.4f} [{ci.low:.4f}, {ci.high:.4f}]"


def _with_unit(text: str, unit: str) -> str:
    return f"{text} {unit}" if unit else text


def _pct(fraction: float, digits: int = 1) -> str:
    """Signed percent ('+3.1%'); with digits=0 unsigned and whole ('95%')."""
    if fraction is None or not math.isfinite(fraction):
        return "n/a"
    return f"{fraction * 100:+.{digits}f}%" if digits else f"{fraction * 100:.0f}%"


def _pct_u(fraction: float) -> str:
    """Unsigned percent for bands and thresholds ('1.0%')."""
    return f"{fraction * 100:.1f}%" if math.isfinite(fraction) else "n/a"


def _plain(value: Any) -> Any:
    """asdict output with enums as their names, so it serialises as JSON."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
