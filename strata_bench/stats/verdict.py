"""The verdict on B against A (or NEW against OLD): SAME, FASTER, SLOWER or UNDECIDED, with its reason.

B is compared with A: a difference is always B - A and a ratio is mean(B) / mean(A). By default
lower is better (times). With `higher_is_better` (tokens/s, GB/s) the verdict names keep their
meaning from B's point of view: FASTER means "B is better", SLOWER "B is worse".

The verdict reads the robust shift: the Hodges-Lehmann estimate of log(B/A) over pairs with its exact
95% signed-rank interval (strata_bench.stats.robust), shown as a relative change. SAME is an
equivalence decision: the whole interval lies inside +/-same_band. The mean difference with its t
interval and the bootstrap intervals (percentile, seeded) are shown next to it as a cross-check,
not used to decide. An UNDECIDED verdict says roughly how many pairs would decide.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Sequence

import numpy as np

from strata_bench.stats.criteria import Criteria
from strata_bench.stats.drift import Drift, drift
from strata_bench.stats.intervals import Interval, welch_interval
from strata_bench.stats.paired import Dominance, PairedStats, dominance, paired_stats
from strata_bench.stats.robust import pairs_to_decide
from strata_bench.stats.samples import ArmStats, arm_stats


class Verdict(str, Enum):
    """B compared with A. FASTER and SLOWER mean better and worse when higher is better."""

    SAME = "SAME"
    FASTER = "FASTER"
    SLOWER = "SLOWER"
    UNDECIDED = "UNDECIDED"


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
    pairs_needed: int | None = None  # UNDECIDED: about how many pairs would decide at the observed spread

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


def decide(rel_ci: Interval | None, criteria: Criteria, subject: str = "B", base: str = "A") -> tuple[Verdict, str]:
    """SAME when the relative CI lies inside +/-same_band; FASTER/SLOWER when it excludes 0;
    UNDECIDED otherwise. SAME is checked first so a tiny but resolved difference reads as SAME."""
    if rel_ci is None:
        return Verdict.UNDECIDED, "fewer than 2 complete pairs: no confidence interval"
    band = criteria.same_band
    ci = (f"{signed_percent(criteria.confidence, 0)} CI of {subject} vs {base} is "
          f"[{signed_percent(rel_ci.low)}, {signed_percent(rel_ci.high)}]")
    if -band <= rel_ci.low and rel_ci.high <= band:
        resolved = " (a difference is resolved, but it is smaller than the band)" if rel_ci.excludes(0) else ""
        return Verdict.SAME, f"{ci}, inside the +/-{unsigned_percent(band)} same band{resolved}"
    if rel_ci.excludes(0):
        verdict, better = _direction(rel_ci.low > 0, criteria)
        good = "higher" if criteria.higher_is_better else "lower"
        return verdict, f"{ci}, excluding 0: {subject} is {better} ({good} is better)"
    return Verdict.UNDECIDED, (f"{ci}: it includes 0 and reaches past the +/-{unsigned_percent(band)} band; "
                               "more pairs may decide")


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
        return True, (f"regression: {subject} is worse by at least {unsigned_percent(worse_bound)} "
                      f"({rel_ci.method}), beyond {unsigned_percent(limit)}")
    at_most = unsigned_percent(_worst(rel_ci, criteria))
    return False, f"no regression beyond {unsigned_percent(limit)} ({subject} worse by at most {at_most})"


def _worst(rel_ci: Interval, criteria: Criteria) -> float:
    return max(0.0, -rel_ci.low if criteria.higher_is_better else rel_ci.high)


def compare(a: Sequence[float], b: Sequence[float], criteria: Criteria = Criteria(), *,
            pairs: Sequence[tuple[float, float]] | None = None,
            a_order: Sequence[int] | None = None, b_order: Sequence[int] | None = None,
            a_first: Sequence[bool] | None = None) -> Comparison:
    """Judge B against A.

    `a` and `b` are every measured value of each arm (for arm stats, dominance, outliers, drift);
    `pairs` the complete (A, B) pairs, by default `zip(a, b)`. `a_order`/`b_order` are the run
    indices of the values (default 0..n-1), used by the drift check; `a_first[i]` whether A ran
    first in pair i (the position effect).
    """
    pairs = list(zip(a, b)) if pairs is None else list(pairs)
    pa = [p[0] for p in pairs]
    pb = [p[1] for p in pairs]
    paired = paired_stats(pa, pb, criteria, a_first)
    rel_ci = paired.shift_ci if paired else None
    verdict, reason = decide(rel_ci, criteria)
    needed = None
    if verdict is Verdict.UNDECIDED and paired is not None:
        needed = pairs_to_decide(paired.shift, rel_ci, paired.n, criteria.same_band)
        if needed is not None:
            reason += f" (about {needed} pairs would decide at this spread)"
    regressed, regression_reason = check_regression(rel_ci, criteria)
    trend = drift(a, a_order if a_order is not None else range(len(a)),
                  b, b_order if b_order is not None else range(len(b)),
                  [y - x for x, y in pairs],
                  tolerance=criteria.same_band * abs(paired.mean_a) if paired else 0.0)
    return Comparison(arm_stats(a), arm_stats(b), paired, dominance(a, b), trend, verdict, reason,
                      regressed, regression_reason, criteria, needed)


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
    head = f"single values, no interval: NEW/OLD = {ratio:.4f} ({signed_percent(rel)})"
    if not math.isfinite(rel):
        return Verdict.UNDECIDED, head, False, ""
    if abs(rel) <= criteria.same_band:
        verdict, why = Verdict.SAME, f"{head}, inside the +/-{unsigned_percent(criteria.same_band)} band"
    else:
        verdict, better = _direction(rel > 0, criteria)
        why = f"{head}: NEW is {better}"
    limit = criteria.fail_on_regression
    worse = -rel if criteria.higher_is_better else rel
    if limit is None:
        return verdict, why, False, ""
    if worse > limit:
        reason = f"regression: NEW is worse by {unsigned_percent(worse)}, beyond {unsigned_percent(limit)}"
        return verdict, why, True, reason
    return verdict, why, False, f"no regression beyond {unsigned_percent(limit)}"



def signed_percent(fraction: float, digits: int = 1) -> str:
    """Signed percent ('+3.1%'); with digits=0 unsigned and whole ('95%')."""
    if fraction is None or not math.isfinite(fraction):
        return "n/a"
    return f"{fraction * 100:+.{digits}f}%" if digits else f"{fraction * 100:.0f}%"


def unsigned_percent(fraction: float) -> str:
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
