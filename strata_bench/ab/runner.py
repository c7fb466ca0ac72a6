"""The A/B runner: a plan's schedule over two arms, every run recorded as it finishes, then judged.

A run that raises `RunFailed` is recorded and the schedule goes on, until more runs have failed than
the plan's failure budget (a `stopped` record). Any other exception (KeyboardInterrupt included) stops
the schedule after an "interrupted" record is appended, so nothing finished is lost.

Kernel A/B contract (for strata_bench.ab.kernel): build two `Arm`s whose callables time one
variant and return a float (or raise RunFailed), call `run_ab(arm_a, arm_b, plan, writer, case=...)`
once per case with one shared `ResultsWriter(kind="ab")`, then `store.finish(writer, outcomes)`;
return an `AbReport`. `strata-bench ab --family` renders it exactly as a command A/B.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import math
from dataclasses import replace
from typing import Any, Callable, Iterator, Mapping, Sequence

from strata_bench.ab.arms import Arm, RunFailed, Sample
from strata_bench.ab.judging import identity, judge_metric, judge_metrics, measured_pairs, metric_names
from strata_bench.ab.plan import Plan, Slot, schedule
from strata_bench.ab.records import AbOutcome, RunRecord
from strata_bench.stats.verdict import Verdict
from strata_bench.results.store import ResultsWriter

# The command's progress display: (label, total runs) -> a context giving advance(text).
Progress = Callable[[str, int], contextlib.AbstractContextManager]


def judge(case: str, plan: Plan, arms: Mapping[str, Mapping[str, Any]], runs: Sequence[RunRecord],
          stopped: str = "", interrupted: str = "") -> AbOutcome:
    """Statistics over the measured runs: arm values from every successful run, paired values
    from pairs whose two runs both succeeded; one judgement per metric, and the identity check."""
    # A run's `value` is its first metric, so with metrics the first one's judgement is the case's.
    metrics = judge_metrics(plan, runs)
    primary = metrics[0] if metric_names(runs) else judge_metric(plan, runs, None)
    return AbOutcome(case, plan, arms, tuple(runs), primary.comparison, primary.excluded_pairs, stopped,
                     interrupted, metrics, identity(runs))


def reject(outcome: AbOutcome, reason: str) -> AbOutcome:
    """The outcome with its timings rejected: verdict UNDECIDED (never FASTER) with `reason`, no regression
    claimed from them, and `rejected` set (the command exits 1)."""
    from dataclasses import replace

    from strata_bench.stats.verdict import Verdict

    def undecided(c):
        return replace(c, verdict=Verdict.UNDECIDED, reason=f"rejected: {reason}", regression=False)

    metrics = tuple(replace(m, comparison=undecided(m.comparison)) for m in outcome.metrics)
    return replace(outcome, comparison=undecided(outcome.comparison), metrics=metrics, rejected=reason)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


class CaseRun:
    """One case's schedule, run a pair at a time (so several cases can be interleaved pair by pair)."""

    def __init__(self, arm_a: Arm, arm_b: Arm, plan: Plan, writer: ResultsWriter | None, case: str,
                 progress: Callable[[RunRecord], None] | None = None) -> None:
        self.arms = {"A": arm_a, "B": arm_b}
        self.describe = {label: dict(arm.describe) for label, arm in self.arms.items()}
        self.plan, self.writer, self.case, self.progress = plan, writer, case, progress
        self.runs: list[RunRecord] = []
        self.failed = 0
        self.stopped = ""
        self.slots = schedule(plan.order, plan.pairs, plan.warmup, plan.seed)
        _append(writer, {"record": "plan", "case": case, **plan.to_dict(), "arms": self.describe})

    @property
    def done(self) -> bool:
        return bool(self.stopped) or len(self.runs) >= len(self.slots)

    def run_pair(self) -> None:
        """The next pair's two runs (fewer if the failure budget stops the case)."""
        for _ in range(2):
            if self.done:
                return
            self._run_next()
        if len(self.runs) == len(self.slots) and not self.stopped:
            self.slots = _more_pairs(self.plan, self.runs, self.slots, self.writer, self.case)

    def _run_next(self) -> None:
        index = len(self.runs)
        slot = self.slots[index]
        try:
            record = _one_run(self.arms[slot.arm], slot, index, self.case)
        except BaseException as exc:  # recorded, then re-raised untouched
            _append(self.writer, {"record": "interrupted", "case": self.case, "run_index": index,
                                  "error": f"{type(exc).__name__}: {exc}".rstrip(": ")})
            raise
        self.runs.append(record)
        _append(self.writer, record.to_json(self.describe[slot.arm]))
        if self.progress:
            self.progress(record)
        self.failed += not record.ok
        if self.failed > self.plan.max_failures:
            self.stopped = (f"{self.failed} of {index + 1} runs failed, more than the --max-failures budget of "
                            f"{self.plan.max_failures}")
            _append(self.writer, {"record": "stopped", "case": self.case, "run_index": index,
                                  "reason": self.stopped})

    def outcome(self) -> AbOutcome:
        pairs = measured_pairs(self.plan, self.runs)
        return judge(self.case, replace(self.plan, pairs=max(pairs, self.plan.pairs)), self.describe, self.runs,
                     self.stopped)


def run_ab(arm_a: Arm, arm_b: Arm, plan: Plan, writer: ResultsWriter | None = None, case: str = "command",
           progress: Callable[[RunRecord], None] | None = None) -> AbOutcome:
    """Run the plan's schedule, appending each record to `writer` as it finishes."""
    run = CaseRun(arm_a, arm_b, plan, writer, case, progress)
    while not run.done:
        run.run_pair()
    return run.outcome()


def run_interleaved(runs: Sequence[CaseRun]) -> list[AbOutcome]:
    """Several cases (parameter combinations) pair by pair: round k runs one pair of every case, the
    cases' order rotated by one each round, so drift over the session falls on every case alike."""
    runs = list(runs)
    k = 0
    while not all(r.done for r in runs):
        shift = k % len(runs)
        for r in runs[shift:] + runs[:shift]:
            if not r.done:
                r.run_pair()
        k += 1
    return [r.outcome() for r in runs]


def _more_pairs(plan: Plan, runs: list[RunRecord], slots: list[Slot], writer, case: str) -> list[Slot]:
    """--until-decided: two more pairs (ABBA stays balanced) while any metric is UNDECIDED, up to the cap."""
    done = (len(slots) - 2 * plan.warmup) // 2
    if done >= plan.until_decided:
        return slots
    open_metrics = [m.name for m in judge("", replace(plan, pairs=done), {}, runs).metrics
                    if m.comparison.verdict is Verdict.UNDECIDED]
    if not open_metrics:
        return slots
    total = min(done + 2, plan.until_decided)
    _append(writer, {"record": "extended", "case": case, "pairs": total,
                     "reason": f"UNDECIDED: {', '.join(open_metrics)}"})
    return schedule(plan.order, total, plan.warmup, plan.seed)


def _one_run(arm: Arm, slot: Slot, index: int, case: str) -> RunRecord:
    started = _now()
    try:
        result = arm.run()
    except RunFailed as exc:
        return RunRecord(case, slot.arm, slot.pair, slot.position, index, slot.warmup, None,
                         exc.reason, started, _now(), exc.details)
    sample = result if isinstance(result, Sample) else Sample(float(result))
    value = float(sample.value)
    failure = None if math.isfinite(value) else f"measurement is not finite ({value})"
    return RunRecord(case, slot.arm, slot.pair, slot.position, index, slot.warmup,
                     value if failure is None else None, failure, started, _now(), sample.details,
                     dict(sample.metrics), dict(sample.same))


def _append(writer: ResultsWriter | None, record: dict[str, Any]) -> None:
    if writer is not None:
        writer.append(record)


@contextlib.contextmanager
def case_progress(total: int, label: str, progress: Progress | None = None) -> Iterator[Callable[[RunRecord], None]]:
    """One case's runs on the progress display the command gave (`progress(label, total)`, None for none):
    each finished run advances it and shows its arm and state."""
    bar = progress(label, total) if progress is not None else contextlib.nullcontext(lambda *args: None)
    with bar as advance:

        def on_run(record: RunRecord) -> None:
            state = "ok" if record.ok else "FAILED"
            advance(f"{record.case}: run {record.run_index + 1} {record.arm} {state}")

        yield on_run
