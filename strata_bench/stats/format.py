"""Text for statistics: values in a readable time scale, mean +/- sd, paired differences, intervals,
ratios, and dominance as a sentence. Precision follows the spread, so digits shown are digits known."""
from __future__ import annotations

import math

from strata_bench.stats.intervals import Interval
from strata_bench.stats.paired import Dominance, PairedStats
from strata_bench.stats.samples import ArmStats
from strata_bench.stats.verdict import signed_percent

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
    return max(0, 1 - math.floor(math.log10(spread) + 1e-9))  # 0.1 computed as 0.0999... is still 0.1


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
        return f"{_with_unit(f'{paired.mean_diff / factor:+.4g}', name)} ({signed_percent(paired.rel_diff)})"
    digits = _decimals(half / factor)
    body = f"{paired.mean_diff / factor:+.{digits}f} +/- {half / factor:.{digits}f}"
    return f"{_with_unit(body, name)} ({signed_percent(paired.rel_diff)})"


def format_interval(ci: Interval | None, unit: str = "", percent: bool = False) -> str:
    """'[-0.21, -0.18] s' in the unit's time scale, or '[-4.1%, -3.7%]' for a relative interval."""
    if ci is None:
        return "n/a"
    if percent:
        return f"[{signed_percent(ci.low)}, {signed_percent(ci.high)}]"
    name, factor = time_scale(max(abs(ci.low), abs(ci.high)), unit)
    digits = _decimals(ci.half_width / factor) if ci.half_width else 4
    return f"[{ci.low / factor:+.{digits}f}, {ci.high / factor:+.{digits}f}] {name}".rstrip()


def format_ratio(ratio: float, ci: Interval | None) -> str:
    """'0.9600 [0.9550, 0.9650]': a ratio with its interval where there is one."""
    if not math.isfinite(ratio):
        return "n/a"
    if ci is None:
        return f"{ratio:.4f}"
    return f"{ratio:.4f} [{ci.low:.4f}, {ci.high:.4f}]"


def _with_unit(text: str, unit: str) -> str:
    return f"{text} {unit}" if unit else text



def describe_dominance(dom: Dominance, higher_is_better: bool = False) -> str:
    """'every run of B is above every run of A (B worse)', or that the runs overlap."""
    if dom is Dominance.OVERLAP:
        return "the runs of A and B overlap"
    above = dom is Dominance.B_ABOVE
    better = above == higher_is_better
    side = "above" if above else "below"
    return f"every run of B is {side} every run of A (B {'better' if better else 'worse'})"
