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
from typing import Any, Callable, Iterator, Mapping, Sequence

from strata_bench.ab.arms import Arm, RunFailed, Sample
from strata_bench.ab.plan import Plan, Slot, schedule
from strata_bench.ab.records import AbOutcome, RunRecord
from strata_bench.report.progress import progress_bar
from strata_bench.results.store import ResultsWriter
from strata_bench.stats.verdict import compare


def judge(case: str, plan: Plan, arms: Mapping[str, Mapping[str, Any]], runs: Sequence[RunRecord],
          stopped: str = "", interrupted: str = "") -> AbOutcome:
    """Statistics over the measured runs: arm values from every successful run, paired values
    from pairs whose two runs both succeeded."""
    measured = [r for r in runs if not r.warmup]
    a = [r for r in measured if r.arm == "A" and r.ok]
    b = [r for r in measured if r.arm == "B" and r.ok]
    by_pair: dict[int, dict[str, RunRecord]] = {}
    for r in measured:
        by_pair.setdefault(r.pair, {})[r.arm] = r
    pairs, excluded = [], []
    for p in range(plan.pairs):
        both = by_pair.get(p, {})
        if "A" in both and "B" in both and both["A"].ok and both["B"].ok:
            pairs.append((both["A"].value, both["B"].value))
        elif both:  # a pair never started (stopped early) is not "excluded", just absent
            excluded.append(p)
    comparison = compare([r.value for r in a], [r.value for r in b], plan.criteria, pairs=pairs,
                         a_order=[r.run_index for r in a], b_order=[r.run_index for r in b])
    return AbOutcome(case, plan, arms, tuple(runs), comparison, tuple(excluded), stopped, interrupted)


def reject(outcome: AbOutcome, reason: str) -> AbOutcome:
    """The outcome with its timings rejected: verdict UNDECIDED (never FASTER) with `reason`, no regression
    claimed from them, and `rejected` set (the command exits 1)."""
    from dataclasses import replace

    from strata_bench.stats.verdict import Verdict

    comparison = replace(outcome.comparison, verdict=Verdict.UNDECIDED, reason=f"rejected: {reason}",
                         regression=False)
    return replace(outcome, comparison=comparison, rejected=reason)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def run_ab(arm_a: Arm, arm_b: Arm, plan: Plan, writer: ResultsWriter | None = None, case: str = "command",
           progress: Callable[[RunRecord], None] | None = None) -> AbOutcome:
    """Run the plan's schedule, appending each record to `writer` as it finishes."""
    arms = {"A": arm_a, "B": arm_b}
    describe = {label: dict(arm.describe) for label, arm in arms.items()}
    _append(writer, {"record": "plan", "case": case, **plan.to_dict(), "arms": describe})
    runs: list[RunRecord] = []
    failed = 0
    stopped = ""
    for index, slot in enumerate(schedule(plan.order, plan.pairs, plan.warmup, plan.seed)):
        try:
            record = _one_run(arms[slot.arm], slot, index, case)
        except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised untouched
            _append(writer, {"record": "interrupted", "case": case, "run_index": index,
                             "error": f"{type(exc).__name__}: {exc}".rstrip(": ")})
            raise
        runs.append(record)
        _append(writer, record.to_json(describe[slot.arm]))
        if progress:
            progress(record)
        failed += not record.ok
        if failed > plan.max_failures:
            stopped = (f"{failed} of {index + 1} runs failed, more than the --max-failures budget of "
                       f"{plan.max_failures}")
            _append(writer, {"record": "stopped", "case": case, "run_index": index, "reason": stopped})
            break
    return judge(case, plan, describe, runs, stopped)


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
                     value if failure is None else None, failure, started, _now(), sample.details)


def _append(writer: ResultsWriter | None, record: dict[str, Any]) -> None:
    if writer is not None:
        writer.append(record)


@contextlib.contextmanager
def case_progress(total: int, label: str, quiet: bool = False) -> Iterator[Callable[[RunRecord], None]]:
    """The progress bar of one case's runs: each finished run advances it and shows its arm and state."""
    with progress_bar(label, total, enabled=not quiet, transient=False) as advance:

        def on_run(record: RunRecord) -> None:
            state = "ok" if record.ok else "FAILED"
            advance(f"{label}: run {record.run_index + 1} {record.arm} {state}")

        yield on_run
