"""The seeds' tables of an A/B: per metric (and per parameter value), A's and B's own values in the
metric's unit, the paired shift of B against A with its interval, dominance, the spread within each
arm and the verdict; and the commands that ran, which head the markdown.

A value cell lists every run where an arm has few (up to SHOW_EACH), else the mean and the range, so
a nonsense figure (0.04 ms to prefill 128 tokens) is seen, not only its ratio.
"""
from __future__ import annotations

import math
import shlex
from typing import Any, Mapping, Sequence

from strata_bench.stats.format import format_diff, time_scale

SHOW_EACH = 3  # an arm with this many measured runs or fewer shows each one
METRIC_HEADERS = ["metric", "A", "B", "B vs A [95% CI]", "B - A (paired)", "dominance", "spread A / B", "verdict"]


def metric_headers(outcome) -> list[str]:
    """METRIC_HEADERS with the arms' -n names where they have them."""
    return [arm_label(h, outcome.arms.get(h)) if h in ("A", "B") else h for h in METRIC_HEADERS]


def describe_arm(describe: Mapping[str, Any]) -> str:
    """'STRATA_X=1 prog --flag' for a command arm; 'variant=new' style for other arms."""
    argv = describe.get("argv")
    if argv is not None:
        return _with_env(describe, argv if isinstance(argv, str) else shlex.join(argv))
    env = _env_text(describe)
    return " ".join(f"{k}={v}" for k, v in describe.items() if k not in ("env", "name")) or env


def _env_text(describe: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" if v is not None else f"-u {k}" for k, v in dict(describe.get("env") or {}).items())


def _with_env(describe: Mapping[str, Any], command: str) -> str:
    return f"{_env_text(describe)} {command}".strip()


def arm_label(label: str, describe: Mapping[str, Any] | None) -> str:
    """'A', or 'A (old)' for an arm named with -n."""
    name = (describe or {}).get("name")
    return f"{label} ({name})" if name else label


def command_lines(outcomes) -> list[tuple[str, str]]:
    """(role, command) for what every arm ran: 'A', 'A server', 'A prepare', ...; a role whose command
    differs between cases (a --param substituted) is given once per case, named by it."""
    found: dict[str, dict[str, list[str]]] = {}
    for o in outcomes:
        for label in ("A", "B"):
            arm = o.arms.get(label) or {}
            who = arm_label(label, arm)
            roles = [(who, describe_arm(arm))] if arm else []
            roles += [(f"{who} {hook}", _with_env(arm, str(arm[hook]))) for hook in ("server", "prepare", "conclude")
                      if arm.get(hook)]
            for role, text in roles:
                found.setdefault(role, {}).setdefault(text, []).append(o.case)
    lines = []
    for role, texts in found.items():
        if len(texts) == 1:
            lines.append((role, next(iter(texts))))
        else:
            lines += [(f"{role}, {', '.join(cases)}", text) for text, cases in texts.items()]
    return lines


def metric_label(m) -> str:
    """'prefill[128] (ms)', 'decode (tok/s, higher)', 'v'."""
    tags = [t for t in (m.unit, "higher" if m.comparison.criteria.higher_is_better else "") if t]
    return f"{m.name} ({', '.join(tags)})" if tags else m.name


def format_values(values: Sequence[float], unit: str, spread: float | None = None) -> str:
    """'12.80, 12.81, 12.79 ms' (each run), or '12.81 (12.79 .. 12.83) ms' (mean and range); decimals
    follow `spread` (default: these values' range), so two arms given one spread show alike."""
    xs = [v for v in values if v is not None and math.isfinite(v)]
    if not xs:
        return "n/a"
    mean = sum(xs) / len(xs)
    name, factor = time_scale(mean, unit)
    digits = _digits(mean / factor, (max(xs) - min(xs) if spread is None else spread) / factor)

    def text(v: float) -> str:
        return f"{v / factor:.{digits}f}"

    body = ", ".join(map(text, xs)) if len(xs) <= SHOW_EACH else f"{text(mean)} ({text(min(xs))} .. {text(max(xs))})"
    return f"{body} {name}".rstrip()


def _digits(magnitude: float, spread: float) -> int:
    """Decimals showing two significant digits of the spread, or four of the value where all agree."""
    if spread > 0:
        return max(0, 1 - math.floor(math.log10(spread) + 1e-9))
    if magnitude == 0 or not math.isfinite(magnitude):
        return 2
    return max(0, 3 - math.floor(math.log10(abs(magnitude))))


def _common_spread(*arms: Sequence[float]) -> float:
    """The smaller range within an arm (0 where every value agrees): one precision for both arms' cells."""
    ranges = [max(xs) - min(xs) for xs in ([v for v in a if v is not None and math.isfinite(v)] for a in arms) if xs]
    positive = [r for r in ranges if r > 0]
    return min(positive) if positive else 0.0


def spread_text(m) -> str:
    """'0.07% / 0.04%': each arm's sd as a share of its mean (n/a below two runs)."""
    def one(arm) -> str:
        if arm.n < 2 or not math.isfinite(arm.sd) or not arm.mean:
            return "n/a"
        return f"{100 * arm.sd / abs(arm.mean):.2f}%"

    return f"{one(m.comparison.a)} / {one(m.comparison.b)}"


def dominance_text(c) -> str:
    if c.dominance.value == "OVERLAP":
        return "overlap"
    return "every B above every A" if c.dominance.value == "B_ABOVE" else "every B below every A"


def shift_text(p) -> str:
    """'+3.02% [+2.85%, +3.20%]': the robust shift of B against A and its interval."""
    from strata_bench.stats.verdict import signed_percent

    ci = "n/a" if p.shift_ci is None else f"[{signed_percent(p.shift_ci.low, 2)}, {signed_percent(p.shift_ci.high, 2)}]"
    return f"{signed_percent(p.shift, 2)} {ci}"


def verdict_text(m) -> str:
    return m.comparison.verdict.value + (" (REGRESSION)" if m.regression else "")


def _judged_cells(m) -> list[str]:
    """A, B, the robust shift with its CI, dominance, spread, verdict of one metric."""
    p = m.comparison.paired
    spread = _common_spread(m.a_values, m.b_values)
    return [format_values(m.a_values, m.unit, spread), format_values(m.b_values, m.unit, spread),
            "n/a" if p is None else shift_text(p), dominance_text(m.comparison), spread_text(m), verdict_text(m)]


def metric_rows(outcome) -> list[list[str]]:
    """One row per metric of a case (METRIC_HEADERS)."""
    rows = []
    for m in outcome.metrics:
        cells = _judged_cells(m)
        rows.append([metric_label(m), *cells[:3], format_diff(m.comparison.paired, m.unit), *cells[3:]])
    return rows


def matrix_headers(outcomes) -> list[str]:
    """'metric', one column per --param name, then A, B, shift, dominance, spread, verdict."""
    names = list(dict.fromkeys(k for o in outcomes for k, _ in o.plan.params))
    arms = [arm_label(label, outcomes[0].arms.get(label)) for label in ("A", "B")]
    return ["metric", *names, *arms, "B vs A [95% CI]", "dominance", "spread A / B", "verdict"]


def matrix_rows(outcomes) -> list[list[str]]:
    """One row per metric and parameter value (a metric a case lacks shows n/a there), grouped by metric."""
    names = [h for h in matrix_headers(outcomes)[1:-6]]
    metrics = list(dict.fromkeys(m.name for o in outcomes for m in o.metrics))
    rows = []
    for name in metrics:
        for o in outcomes:
            params = dict(o.plan.params)
            m = next((m for m in o.metrics if m.name == name), None)
            judged = _judged_cells(m) if m else ["n/a"] * 6
            rows.append([metric_label(m) if m else name, *(params.get(k, "") for k in names), *judged])
    return rows
