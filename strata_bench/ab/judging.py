"""Judging one case's runs: paired statistics per metric, and the output-identity check.

A metric's pairs are the measured pairs whose two runs both succeeded and both printed that metric
(a keyed metric, `prefill[512]`, may be missing from a run that printed other keys). Identity
compares every successful run, warm-ups included, with the first one that printed the entry, and is
"same" only where both arms printed it in every successful run: an arm, key or run that never
printed it is "missing" (a failure unless --allow-missing), never a copy of the other arm's value.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from strata_bench.ab.metrics import output_bytes, printable, quoted
from strata_bench.ab.plan import Plan
from strata_bench.ab.records import RunRecord
from strata_bench.stats.verdict import Comparison, compare


@dataclass(frozen=True)
class MetricResult:
    """One metric's judgement: the comparison of B against A and the pairs left out."""

    name: str
    comparison: Comparison
    excluded_pairs: tuple[int, ...]
    unit: str = ""  # the unit its figures (and so its statistics) are in, after --unit's conversion
    a_values: tuple[float, ...] = ()  # A's measured figures in run order (in `unit`)
    b_values: tuple[float, ...] = ()

    @property
    def regression(self) -> bool:
        return self.comparison.regression

    def summary(self) -> dict[str, Any]:
        c = self.comparison
        return {"name": self.name, "higher_is_better": c.criteria.higher_is_better, "unit": self.unit,
                "A_values": list(self.a_values), "B_values": list(self.b_values),
                "verdict": c.verdict.value, "reason": c.reason, "regression": c.regression,
                "regression_reason": c.regression_reason,
                "excluded_pairs": list(self.excluded_pairs), "comparison": c.to_dict()}


def measured_pairs(plan: Plan, runs: Sequence[RunRecord]) -> int:
    """Pairs scheduled: the plan's, or more when --until-decided added some."""
    return max([plan.pairs] + [r.pair + 1 for r in runs if not r.warmup])


def judge_metric(plan: Plan, runs: Sequence[RunRecord], name: str | None) -> MetricResult:
    """Statistics of one metric (None: each run's `value`) over the measured runs."""
    factor, unit = plan.shown(name)

    def figure(r: RunRecord) -> float | None:
        if not r.ok:
            return None
        raw = r.value if name is None else r.metrics.get(name)
        return None if raw is None else raw * factor  # in the unit shown: statistics and text agree

    measured = [r for r in runs if not r.warmup]
    a = [r for r in measured if r.arm == "A" and figure(r) is not None]
    b = [r for r in measured if r.arm == "B" and figure(r) is not None]
    by_pair: dict[int, dict[str, RunRecord]] = {}
    for r in measured:
        by_pair.setdefault(r.pair, {})[r.arm] = r
    pairs, positions, excluded = [], [], []
    for p in range(measured_pairs(plan, runs)):
        both = by_pair.get(p, {})
        if "A" in both and "B" in both and figure(both["A"]) is not None and figure(both["B"]) is not None:
            pairs.append((figure(both["A"]), figure(both["B"])))
            positions.append(both["A"].position)
        elif both:  # a pair never started (stopped early) is not "excluded", just absent
            excluded.append(p)
    label = name or plan.metric
    criteria = replace(plan.criteria, higher_is_better=plan.higher_is_better(label))
    comparison = compare([figure(r) for r in a], [figure(r) for r in b], criteria, pairs=pairs,
                         a_order=[r.run_index for r in a], b_order=[r.run_index for r in b],
                         a_first=[pos == 0 for pos in positions])
    return MetricResult(label, comparison, tuple(excluded), unit, tuple(figure(r) for r in a),
                        tuple(figure(r) for r in b))


def metric_names(runs: Sequence[RunRecord]) -> list[str]:
    """Every metric entry printed by any run, in order of first appearance."""
    return list(dict.fromkeys(name for r in runs for name in r.metrics))


def judge_metrics(plan: Plan, runs: Sequence[RunRecord]) -> tuple[MetricResult, ...]:
    """One result per metric entry; a single result over `value` when the runs carry no metrics."""
    names = metric_names(runs)
    if not names:
        return (judge_metric(plan, runs, None),)
    return tuple(judge_metric(plan, runs, n) for n in names)


@dataclass(frozen=True)
class IdentityRow:
    """One --same entry: what A's and B's runs printed (None: missing), the first run that differs from
    the reference run, and which arm, key or run never printed it."""

    name: str
    a_value: str | None
    b_value: str | None
    same: bool  # printed by every successful run of both arms, identically
    mismatch: str  # "" when no printed value differs; else which runs printed what
    missing: str = ""  # "" when every successful run of both arms printed it; else who did not

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "A": self.a_value, "B": self.b_value, "same": self.same,
                "mismatch": self.mismatch, "missing": self.missing}


def _who(r: RunRecord) -> str:
    kind = "warm-up" if r.warmup else f"pair {r.pair}"
    return f"run {r.run_index} ({r.arm}, {kind})"


def identity(runs: Sequence[RunRecord]) -> tuple[IdentityRow, ...]:
    """Per --same entry (a key of a keyed entry on its own), over every successful run, warm-ups included:
    the printed values must agree, and only where both arms printed it is it judged the same."""
    done = [r for r in runs if r.failure is None]
    names = list(dict.fromkeys(n for r in done for n in r.same))
    return tuple(_identity_row(name, done) for name in names)


def _identity_row(name: str, done: Sequence[RunRecord]) -> IdentityRow:
    printed = [r for r in done if r.same.get(name) is not None]
    ref = printed[0] if printed else None  # none when the regex matched no run's output
    odd = next((r for r in printed if output_bytes(r.same[name]) != output_bytes(ref.same[name])), None)
    mismatch = "" if odd is None else \
        f"{_who(ref)} printed {_show(ref.same[name])}, {_who(odd)} printed {_show(odd.same[name])}"
    missing = "; ".join(filter(None, (_missing(arm, [r for r in done if r.arm == arm], name) for arm in "AB")))
    shown = {arm: " / ".join(dict.fromkeys(printable(r.same[name]) for r in printed if r.arm == arm)) or None
             for arm in "AB"}
    return IdentityRow(name, shown["A"], shown["B"], not (mismatch or missing), mismatch, missing)


def _missing(arm: str, runs: Sequence[RunRecord], name: str) -> str:
    """Who in one arm never printed the entry: '' when every successful run did."""
    silent = [r for r in runs if r.same.get(name) is None]
    if not runs:
        return f"{arm} has no successful run"
    if len(silent) == len(runs):
        return f"no run of {arm} printed it"
    if silent:
        more = f" and {len(silent) - 1} more" if len(silent) > 1 else ""
        return f"{_who(silent[0])}{more} printed nothing for it"
    return ""


def _show(text: str | None) -> str:
    return "nothing" if text is None else quoted(text)
