"""What an A/B run leaves: a record per finished run, a case's outcome, and a whole invocation's report.

Records appended to the JSONL (one object per line; `record` says which):
  plan         once per case, first: order, pairs, warm-up, seed, failure budget, criteria, arms.
  run          arm, pair, position (0 first, 1 second in its pair), run_index (execution order,
               warm-up included), warmup, value, failure (reason or null), started/ended (UTC ISO),
               plus the arm's description (argv, env switches) and the run's details (exit code,
               wall_s, output tail).
  stopped      the failure budget was exceeded; no further runs of that case.
  interrupted  an exception ended the schedule (its name and text).
  rejected     kernel A/B only, after the runs: a timed output differs from the checked result, or a
               time beats the roofline (reason); the case's verdict is UNDECIDED and the command exits 1.
A report recomputes the statistics from these records alone (strata_bench.ab.store).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from strata_bench.ab.plan import Plan
from strata_bench.errors import CheckFailed
from strata_bench.stats.format import format_value
from strata_bench.stats.verdict import Comparison


@dataclass(frozen=True)
class RunRecord:
    """One finished run as recorded."""

    case: str
    arm: str
    pair: int
    position: int
    run_index: int
    warmup: bool
    value: float | None
    failure: str | None
    started: str
    ended: str
    details: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)  # every --metric figure (value is the first)
    same: Mapping[str, str | None] = field(default_factory=dict)  # every --same capture

    @property
    def ok(self) -> bool:
        return self.failure is None and self.value is not None

    def to_json(self, describe: Mapping[str, Any]) -> dict[str, Any]:
        body = {"record": "run", **dict(describe), **dict(self.details)}
        body.update(case=self.case, arm=self.arm, pair=self.pair, position=self.position,
                    run_index=self.run_index, warmup=self.warmup, value=self.value,
                    failure=self.failure, started=self.started, ended=self.ended)
        # The results writer sorts keys: the order the run printed its metrics in is kept beside them.
        if self.metrics:
            body["metrics"], body["metric_order"] = dict(self.metrics), list(self.metrics)
        if self.same:
            body["same"], body["same_order"] = dict(self.same), list(self.same)
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> "RunRecord":
        known = {"case", "arm", "pair", "position", "run_index", "warmup", "value", "failure",
                 "started", "ended", "record", "metrics", "same", "metric_order", "same_order"}
        details = {k: v for k, v in body.items() if k not in known}
        return cls(body.get("case", ""), body["arm"], int(body["pair"]), int(body.get("position", 0)),
                   int(body["run_index"]), bool(body.get("warmup", False)), body.get("value"),
                   body.get("failure"), body.get("started", ""), body.get("ended", ""), details,
                   _ordered(body, "metrics", "metric_order"), _ordered(body, "same", "same_order"))


def _ordered(body: Mapping[str, Any], key: str, order_key: str) -> dict[str, Any]:
    values = dict(body.get(key) or {})
    order = [k for k in body.get(order_key) or [] if k in values]
    return {k: values[k] for k in order + [k for k in values if k not in order]}


@dataclass(frozen=True)
class AbOutcome:
    """One case's runs and their judgement."""

    case: str
    plan: Plan
    arms: Mapping[str, Mapping[str, Any]]  # label -> description
    runs: tuple[RunRecord, ...]
    comparison: Comparison
    excluded_pairs: tuple[int, ...]  # measured pairs with a failed or missing run
    stopped: str = ""  # why the schedule stopped early ("" when it ran to the end)
    interrupted: str = ""
    metrics: tuple = ()  # MetricResult per metric entry (strata_bench.ab.judging); the first is `comparison`'s
    identity: tuple = ()  # IdentityRow per --same entry
    rejected: str = ""  # why the timings are not results (timed output differs, impossible time)
    flags: tuple[str, ...] = ()  # what the arms add to the notes (kernel A/B: sensitivity, throttled pairs)

    @property
    def identity_failures(self) -> list:
        """Entries whose printed values differ, and (unless --allow-missing) entries some run never printed."""
        return [row for row in self.identity if row.mismatch or (row.missing and not self.plan.allow_missing)]

    @property
    def failed_arms(self) -> list[str]:
        """'B: all 4 measured runs failed' per arm without one successful measured run: nothing to compare,
        whatever the failure budget allowed."""
        out = []
        for label in ("A", "B"):
            measured = [r for r in self.runs if r.arm == label and not r.warmup]
            if not any(r.ok for r in measured):
                out.append(f"{label}: all {len(measured)} measured runs failed" if measured
                           else f"{label}: no measured run")
        return out

    @property
    def failures(self) -> list[RunRecord]:
        return [r for r in self.runs if not r.ok]

    @property
    def warmups(self) -> list[RunRecord]:
        return [r for r in self.runs if r.warmup]

    @property
    def regression(self) -> bool:
        return self.comparison.regression or any(m.regression for m in self.metrics)

    @property
    def regressions(self) -> list[str]:
        """The regression sentence of each metric that regressed."""
        found = [f"{m.name}: {m.comparison.regression_reason}" for m in self.metrics if m.regression]
        if self.comparison.regression and not found:
            found.append(self.comparison.regression_reason)
        return found

    def notes(self) -> list[str]:
        """What a reader must know beyond the numbers: discarded warm-ups, excluded pairs, outliers."""
        notes = []
        if self.arms.get("A") and _unnamed(self.arms.get("A")) == _unnamed(self.arms.get("B")):
            notes.append("A and B are the same (an A/A run): any difference is noise")
        if self.warmups:
            vals = ", ".join(f"{r.arm}={self._shown_value(r)}" if r.ok else f"{r.arm}=failed" for r in self.warmups)
            notes.append(f"{len(self.warmups)} warm-up runs discarded from the statistics ({vals})")
        if self.excluded_pairs:
            notes.append(f"{len(self.excluded_pairs)} pairs excluded from the paired statistics because a run "
                         f"failed or is missing: {', '.join(map(str, self.excluded_pairs))}")
        for label, arm in (("A", self.comparison.a), ("B", self.comparison.b)):
            if arm.outliers:
                idx = [self._arm_runs(label)[i].run_index for i in arm.outliers]
                notes.append(f"{label}: outliers by modified z-score at run {', '.join(map(str, idx))} "
                             f"(kept in the statistics)")
        paired = self.comparison.paired
        if paired is not None and paired.pair_outliers:
            measured = sorted({r.pair for r in self.runs if not r.warmup} - set(self.excluded_pairs))
            which = [str(measured[i]) for i in paired.pair_outliers if i < len(measured)]
            notes.append(f"pairs {', '.join(which)}: log(B/A) is an outlier by modified z-score (kept; the "
                         f"robust shift is hardly moved by it)")
        for row in self.identity:
            if row.mismatch:
                notes.append(f"output {row.name!r} is not identical: {row.mismatch}")
            if row.missing:
                tolerated = " (allowed by --allow-missing)" if self.plan.allow_missing else ""
                notes.append(f"output {row.name!r} is missing: {row.missing}{tolerated}")
        for arm in self.failed_arms:
            notes.append(f"nothing to compare: {arm}")
        if self.stopped:
            notes.append(f"stopped early: {self.stopped}")
        if self.interrupted:
            notes.append(f"interrupted: {self.interrupted}")
        if self.rejected:
            notes.append(f"rejected: {self.rejected}")
        notes.extend(self.flags)
        return notes

    def _shown_value(self, r: RunRecord) -> str:
        """A run's value (its first metric, or its wall time) as the tables show it, --unit applied."""
        factor, unit = self.plan.shown(next(iter(r.metrics), None))
        return format_value(r.value * factor, unit)

    def _arm_runs(self, label: str) -> list[RunRecord]:
        return [r for r in self.runs if r.arm == label and not r.warmup and r.ok]

    def summary(self) -> dict[str, Any]:
        return {"case": self.case, "plan": self.plan.to_dict(), "arms": {k: dict(v) for k, v in self.arms.items()},
                "verdict": self.comparison.verdict.value, "reason": self.comparison.reason,
                "regression": self.comparison.regression,
                "regression_reason": self.comparison.regression_reason,
                "comparison": self.comparison.to_dict(), "runs": len(self.runs),
                "failures": [{"run_index": r.run_index, "arm": r.arm, "pair": r.pair, "reason": r.failure}
                             for r in self.failures],
                "warmup_values": [{"arm": r.arm, "value": r.value, "failure": r.failure} for r in self.warmups],
                "excluded_pairs": list(self.excluded_pairs), "stopped": self.stopped,
                "interrupted": self.interrupted, **({"rejected": self.rejected} if self.rejected else {}),
                "notes": self.notes(),
                "params": dict(self.plan.params),
                "metrics": [m.summary() for m in self.metrics],
                "identity": [row.to_dict() for row in self.identity]}


def _unnamed(describe: Mapping[str, Any] | None) -> dict[str, Any]:
    """An arm's description without its -n name: two names for one command are still an A/A run."""
    return {k: v for k, v in dict(describe or {}).items() if k != "name"}


@dataclass(frozen=True)
class AbReport:
    """Outcomes of one `ab` invocation and where they were written."""

    outcomes: tuple[AbOutcome, ...]
    summary_path: Path | None
    records_path: Path | None

    def raise_for_status(self) -> None:
        """CheckFailed (exit 1) when a case was rejected, stopped on failures or regressed."""
        rejected = [o for o in self.outcomes if o.rejected]
        if rejected:
            raise CheckFailed("; ".join(f"{o.case}: {o.rejected}" for o in rejected))
        for outcome in self.outcomes:
            if outcome.stopped:
                raise CheckFailed(f"{outcome.case}: too many failed runs: {outcome.stopped}")
        dead = [f"{o.case}: {arm}" for o in self.outcomes for arm in o.failed_arms]
        if dead:
            raise CheckFailed("an arm has no successful run: " + "; ".join(dead))
        different = [(o, row) for o in self.outcomes for row in o.identity_failures]
        if different:
            raise CheckFailed("; ".join(f"{o.case}: output {row.name!r} " + (
                f"differs: {row.mismatch}" if row.mismatch else f"is missing: {row.missing} (--allow-missing "
                                                                "accepts that)") for o, row in different))
        regressed = [o for o in self.outcomes if o.regression]
        if regressed:
            raise CheckFailed("; ".join(f"{o.case}: {why}" for o in regressed for why in o.regressions))
