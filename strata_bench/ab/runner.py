"""A/B runner: a schedule of runs over two arms, every run recorded as it finishes, paired statistics.

An *arm* is a callable that performs one run and returns its measurement: a float, or a `Sample`
(value plus details to record). A run that fails in a way worth recording (nonzero exit, timeout,
missing metric, a kernel that gave wrong bits) raises `RunFailed(reason, details)`; the runner records
it and goes on. Any other exception (KeyboardInterrupt included) stops the schedule after an
"interrupted" record is appended, so nothing finished is lost. Command arms (`command_arm`) run a
fresh process per run; a kernel arm (strata_bench.ab.kernel) is any callable that times one variant.

Orders (pairs are numbered 0..N-1; warm-up pairs -K..-1 run first and are recorded with warmup=true):
  abba    pair p runs A then B when p is even, B then A when p is odd: A B | B A | A B | B A ...
          so a linear drift adds the same amount to each arm over every two pairs. Warm-up pairs
          follow the same rule (pair -1 runs B A), so the alternation is unbroken at the start.
  ab      every pair runs A then B.
  random  each pair's order is a coin flip from random.Random(seed); the seed is recorded.

Records appended to the JSONL (one object per line; `record` says which):
  plan         once per case, first: order, pairs, warm-up, seed, failure budget, criteria, arms.
  run          arm, pair, position (0 first, 1 second in its pair), run_index (execution order,
               warm-up included), warmup, value, failure (reason or null), started/ended (UTC ISO),
               plus the arm's description (argv, env switches) and the run's details (exit code,
               wall_s, output tail).
  stopped      the failure budget was exceeded; no further runs of that case.
  interrupted  an exception ended the schedule (its name and text).
A report recomputes the statistics from these records alone (`outcomes_from_records`).

Kernel A/B contract (for strata_bench.ab.kernel): build two `Arm`s whose callables time one
variant and return a float (or raise RunFailed), call `run_ab(arm_a, arm_b, plan, writer, case=...)`
once per case with one shared `ResultsWriter(kind="ab")`, then `finish(writer, outcomes)`;
return an `AbReport`. `strata-bench ab --family` renders it exactly as a command A/B.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import random
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from strata_bench.errors import CheckFailed, InputError
from strata_bench.results.store import ResultsWriter, slug
from strata_bench.stats.core import Comparison, Criteria, compare, format_value

ORDERS = ("abba", "ab", "random")
METRIC_GROUP = "value"  # the named group --metric must define: (?P<value>...)
OUTPUT_TAIL_CHARS = 2000
KILL_GRACE_S = 5.0  # after SIGKILL, how long to wait for the pipe to close


class RunFailed(Exception):
    """One run failed in a way the runner records and shows (it does not stop the schedule)."""

    def __init__(self, reason: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = dict(details or {})


@dataclass(frozen=True)
class Sample:
    """A measurement with details worth keeping (exit code, output tail, wall time)."""

    value: float
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Arm:
    """One side of the comparison: a label, a callable doing one run, and what to record about it."""

    label: str  # "A" or "B"
    run: Callable[[], float | Sample]
    describe: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Slot:
    """One scheduled run."""

    pair: int  # -K..-1 for warm-up pairs, 0..N-1 for measured pairs
    position: int  # 0: first run of its pair, 1: second
    arm: str

    @property
    def warmup(self) -> bool:
        return self.pair < 0


@dataclass(frozen=True)
class Plan:
    """How to run and judge an A/B comparison; `max_failures` is a count of runs."""

    order: str = "abba"
    pairs: int = 10
    warmup: int = 1
    seed: int = 0
    max_failures: int = 5
    criteria: Criteria = Criteria()
    unit: str = "s"
    metric: str = "wall time"

    @property
    def total_runs(self) -> int:
        return 2 * (self.pairs + self.warmup)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_plan(order: str = "abba", pairs: int = 10, warmup: int = 1, seed: int | None = None,
              max_failures: str | int | None = None, criteria: Criteria = Criteria(),
              unit: str = "s", metric: str = "wall time") -> Plan:
    """Validate the settings; `max_failures` is a count ("3", 3) or a share of all runs ("25%")."""
    if order not in ORDERS:
        raise InputError(f"--order must be one of {', '.join(ORDERS)}, got {order!r}")
    if pairs < 1:
        raise InputError(f"--pairs must be at least 1, got {pairs}")
    if warmup < 0:
        raise InputError(f"--warmup must be 0 or more, got {warmup}")
    seed = secrets.randbits(32) if seed is None else int(seed)
    total = 2 * (pairs + warmup)
    return Plan(order, pairs, warmup, seed, failure_budget(max_failures, total), criteria, unit, metric)


def failure_budget(spec: str | int | None, total_runs: int) -> int:
    """Failed runs tolerated: default 25% of all runs (rounded down)."""
    spec = "25%" if spec is None else str(spec).strip()
    try:
        if spec.endswith("%"):
            share = float(spec[:-1]) / 100
            if not 0 <= share <= 1:
                raise ValueError
            return int(math.floor(share * total_runs + 1e-9))
        count = int(spec)
        if count < 0:
            raise ValueError
        return count
    except ValueError:
        raise InputError(f"--max-failures must be a count or a percentage like 25%, got {spec!r}") from None


def schedule(order: str, pairs: int, warmup: int = 0, seed: int = 0) -> list[Slot]:
    """Every run in execution order: warm-up pairs -warmup..-1, then pairs 0..pairs-1."""
    coin = random.Random(seed)
    slots: list[Slot] = []
    for pair in range(-warmup, pairs):
        if order == "abba":
            first = "A" if pair % 2 == 0 else "B"
        elif order == "ab":
            first = "A"
        else:
            first = coin.choice("AB")
        second = "B" if first == "A" else "A"
        slots += [Slot(pair, 0, first), Slot(pair, 1, second)]
    return slots


# ---------------------------------------------------------------- records and outcomes

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

    @property
    def ok(self) -> bool:
        return self.failure is None and self.value is not None

    def to_json(self, describe: Mapping[str, Any]) -> dict[str, Any]:
        body = {"record": "run", **dict(describe), **dict(self.details)}
        body.update(case=self.case, arm=self.arm, pair=self.pair, position=self.position,
                    run_index=self.run_index, warmup=self.warmup, value=self.value,
                    failure=self.failure, started=self.started, ended=self.ended)
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> "RunRecord":
        known = {"case", "arm", "pair", "position", "run_index", "warmup", "value", "failure",
                 "started", "ended", "record"}
        details = {k: v for k, v in body.items() if k not in known}
        return cls(body.get("case", ""), body["arm"], int(body["pair"]), int(body.get("position", 0)),
                   int(body["run_index"]), bool(body.get("warmup", False)), body.get("value"),
                   body.get("failure"), body.get("started", ""), body.get("ended", ""), details)


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

    @property
    def failures(self) -> list[RunRecord]:
        return [r for r in self.runs if not r.ok]

    @property
    def warmups(self) -> list[RunRecord]:
        return [r for r in self.runs if r.warmup]

    @property
    def regression(self) -> bool:
        return self.comparison.regression

    def notes(self) -> list[str]:
        """What a reader must know beyond the numbers: discarded warm-ups, excluded pairs, outliers."""
        notes = []
        if self.arms.get("A") and self.arms.get("A") == self.arms.get("B"):
            notes.append("A and B are the same (an A/A run): any difference is noise")
        if self.warmups:
            vals = ", ".join(f"{r.arm}={format_value(r.value, self.plan.unit)}" if r.ok else f"{r.arm}=failed"
                             for r in self.warmups)
            notes.append(f"{len(self.warmups)} warm-up runs discarded from the statistics ({vals})")
        if self.excluded_pairs:
            notes.append(f"{len(self.excluded_pairs)} pairs excluded from the paired statistics because a run "
                         f"failed or is missing: {', '.join(map(str, self.excluded_pairs))}")
        for label, arm in (("A", self.comparison.a), ("B", self.comparison.b)):
            if arm.outliers:
                idx = [self._arm_runs(label)[i].run_index for i in arm.outliers]
                notes.append(f"{label}: outliers by modified z-score at run {', '.join(map(str, idx))} "
                             f"(kept in the statistics)")
        if self.stopped:
            notes.append(f"stopped early: {self.stopped}")
        if self.interrupted:
            notes.append(f"interrupted: {self.interrupted}")
        return notes

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
                "interrupted": self.interrupted, "notes": self.notes()}


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


# ---------------------------------------------------------------- the runner

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


# ---------------------------------------------------------------- command arms

@dataclass(frozen=True)
class CommandSpec:
    """How one arm runs its command: a fresh process per run."""

    argv: tuple[str, ...] | str  # a string only with shell=True
    env: Mapping[str, str | None] = field(default_factory=dict)  # None unsets the variable
    shell: bool = False
    metric: re.Pattern[str] | None = None
    timeout: float | None = None

    def describe(self) -> dict[str, Any]:
        argv = self.argv if isinstance(self.argv, str) else list(self.argv)
        return {"argv": argv, "env": dict(self.env), "shell": self.shell}


def parse_env(items: Sequence[str]) -> dict[str, str | None]:
    """`K=V` sets K to V (V may be empty); a bare `K` removes K from this arm's environment."""
    out: dict[str, str | None] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise InputError(f"environment switch must be NAME=VALUE or NAME, got {item!r}")
        out[name] = value if eq else None
    return out


def compile_metric(pattern: str | None) -> re.Pattern[str] | None:
    """The --metric regex; it must define the named group `value`."""
    if pattern is None:
        return None
    try:
        regex = re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise InputError(f"--metric is not a valid regex ({exc}): {pattern!r}") from None
    if METRIC_GROUP not in regex.groupindex:
        raise InputError(f"--metric must have a named group (?P<{METRIC_GROUP}>...), got {pattern!r}")
    return regex


def command_argv(text: str, shell: bool) -> tuple[str, ...] | str:
    """Split a command string as a shell splits words (no shell runs it), or keep it for --shell."""
    if shell:
        return text
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise InputError(f"cannot split command {text!r}: {exc}") from None
    if not argv:
        raise InputError("empty command")
    return argv


def check_runnable(spec: CommandSpec) -> None:
    """Fail before the first run when the program cannot be found (a usage error, not 2N failures)."""
    if spec.shell:
        return
    program = spec.argv[0]
    if os.sep in program:
        if not os.access(program, os.X_OK):
            raise InputError(f"command is not executable: {program!r}")
    elif shutil.which(program, path=_arm_env(spec.env).get("PATH")) is None:
        raise InputError(f"command not found: {program!r}")


def _arm_env(switch: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment with only the named variables changed."""
    env = dict(os.environ)
    for name, value in switch.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def command_arm(label: str, spec: CommandSpec) -> Arm:
    check_runnable(spec)
    return Arm(label, lambda: run_command(spec), spec.describe())


def run_command(spec: CommandSpec) -> Sample:
    """Run once; the value is the metric from stdout+stderr, or the wall time in seconds."""
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(spec.argv, shell=spec.shell, env=_arm_env(spec.env),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        raise RunFailed(f"cannot start: {exc}") from None
    try:
        raw, _ = proc.communicate(timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        raw = _kill(proc)
        wall = time.perf_counter() - started
        raise RunFailed(f"timed out after {spec.timeout:g} s (process group killed)",
                        _details(proc, raw, wall)) from None
    except BaseException:
        _kill(proc)  # Ctrl-C: take the whole group down, then let the runner record it
        raise
    wall = time.perf_counter() - started
    details = _details(proc, raw, wall)
    if proc.returncode != 0:
        raise RunFailed(f"exit code {proc.returncode}", details)
    if spec.metric is None:
        return Sample(wall, details)
    return Sample(read_metric(spec.metric, _text(raw), details), details)


def read_metric(regex: re.Pattern[str], text: str, details: Mapping[str, Any] | None = None) -> float:
    """The `value` group of the LAST match (a program that prints progress repeats its figure)."""
    matches = list(regex.finditer(text))
    if not matches:
        raise RunFailed(f"metric not found: {regex.pattern!r} does not match the output", details)
    raw = matches[-1].group(METRIC_GROUP)
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise RunFailed(f"metric group {METRIC_GROUP!r} is not a number: {raw!r}", details) from None


def _kill(proc: subprocess.Popen) -> bytes:
    """SIGKILL the run's process group (it has its own session), and collect what it printed."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        raw, _ = proc.communicate(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipe
        proc.kill()
        raw = b""
    return raw or b""


def _text(raw: bytes | None) -> str:
    return (raw or b"").decode("utf-8", errors="replace")


def _details(proc: subprocess.Popen, raw: bytes | None, wall: float) -> dict[str, Any]:
    return {"exit_code": proc.returncode, "wall_s": round(wall, 6),
            "output_tail": _text(raw)[-OUTPUT_TAIL_CHARS:]}


# ---------------------------------------------------------------- whole command A/B

@dataclass(frozen=True)
class AbReport:
    """Outcomes of one `ab` invocation and where they were written."""

    outcomes: tuple[AbOutcome, ...]
    summary_path: Path | None
    records_path: Path | None

    def raise_for_status(self) -> None:
        """CheckFailed (exit 1) when a case stopped on failures or regressed."""
        for outcome in self.outcomes:
            if outcome.stopped:
                raise CheckFailed(f"{outcome.case}: too many failed runs: {outcome.stopped}")
        regressed = [o for o in self.outcomes if o.regression]
        if regressed:
            raise CheckFailed("; ".join(f"{o.case}: {o.comparison.regression_reason}" for o in regressed))


def finish(writer: ResultsWriter, outcomes: Sequence[AbOutcome], interrupted: bool = False) -> Path:
    """Write the summary file next to the records (schema and provenance come from the writer)."""
    body = {"cases": [o.summary() for o in outcomes], "interrupted": interrupted}
    return writer.finish(body, failures=sum(len(o.failures) for o in outcomes))


def _finish_partial(writer: ResultsWriter) -> None:
    """After Ctrl-C or a crash: a summary of the runs that finished, marked interrupted. Never masks
    the original exception (the records file alone is still a complete account)."""
    from strata_bench.results.store import read_records

    try:
        writer.close()
        outcomes = outcomes_from_records(read_records(writer.records_path))
        body = {"cases": [o.summary() for o in outcomes], "interrupted": True}
        writer.finish(body, failures=sum(len(o.failures) for o in outcomes))
    except Exception:  # noqa: BLE001 - best effort only
        pass


def results_directory(root: Path, provenance: Mapping[str, Any]) -> Path:
    """results/<device-slug>: the first GPU's name when provenance lists one, else 'cpu'."""
    devices = provenance.get("devices") or []
    name = devices[0].get("name") if devices and isinstance(devices[0], Mapping) else None
    return Path(root) / slug(name or "cpu")


@contextlib.contextmanager
def progress_bar(total: int, label: str, quiet: bool = False) -> Iterator[Callable[[RunRecord], None]]:
    """A rich progress bar with ETA on stderr; silent when stderr is not a terminal or with quiet."""
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    console = Console(stderr=True)
    disable = quiet or not console.is_terminal
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=disable) as bar:
        task = bar.add_task(label, total=total)

        def advance(record: RunRecord) -> None:
            state = "ok" if record.ok else "FAILED"
            bar.update(task, advance=1, description=f"{label}: run {record.run_index + 1} {record.arm} {state}")

        yield advance


def run_command_ab(spec_a: CommandSpec, spec_b: CommandSpec, plan: Plan, results_root: Path | None,
                   provenance: Mapping[str, Any] | None = None, quiet: bool = False,
                   case: str = "command") -> AbReport:
    """A/B of two command lines (or one with an environment switch); records under results_root.

    `provenance` is stored in the summary as given (the CLI passes `provenance.collect(...)`, which
    adds the GPU, clocks and versions); the arms' argv and env switches are added under "ab".
    """
    arm_a, arm_b = command_arm("A", spec_a), command_arm("B", spec_b)
    prov = dict(provenance or {})
    prov["ab"] = {"A": spec_a.describe(), "B": spec_b.describe(), "order": plan.order, "seed": plan.seed}
    writer = ResultsWriter(results_directory(results_root, prov), "ab", prov) if results_root else None
    try:
        with progress_bar(plan.total_runs, case, quiet) as advance:
            outcome = run_ab(arm_a, arm_b, plan, writer, case, advance)
    except BaseException:
        if writer is not None:
            _finish_partial(writer)
        raise
    summary = finish(writer, [outcome]) if writer else None
    return AbReport((outcome,), summary, writer.records_path if writer else None)


# ---------------------------------------------------------------- from records (reports)

def outcomes_from_records(records: Sequence[Mapping[str, Any]]) -> list[AbOutcome]:
    """Rebuild every case's outcome from an ab JSONL (plan record first, then its runs)."""
    plans: dict[str, tuple[Plan, dict]] = {}
    runs: dict[str, list[RunRecord]] = {}
    stopped: dict[str, str] = {}
    interrupted: dict[str, str] = {}
    for body in records:
        kind, case = body.get("record"), body.get("case", "")
        if kind == "plan":
            plans[case] = (_plan_from_json(body), body.get("arms", {}))
            runs[case] = []
        elif kind == "run":
            runs.setdefault(case, []).append(RunRecord.from_json(body))
        elif kind == "stopped":
            stopped[case] = body.get("reason", "")
        elif kind == "interrupted":
            interrupted[case] = body.get("error", "")
    missing = [c for c in runs if c not in plans]
    if missing:
        raise InputError(f"ab records without a plan record for case {missing[0]!r}")
    return [judge(case, plans[case][0], plans[case][1], runs[case], stopped.get(case, ""),
                  interrupted.get(case, "")) for case in plans]


def _plan_from_json(body: Mapping[str, Any]) -> Plan:
    fields = {k: body[k] for k in ("order", "pairs", "warmup", "seed", "max_failures", "unit", "metric") if k in body}
    criteria = Criteria(**{k: v for k, v in dict(body.get("criteria", {})).items()
                           if k in Criteria.__dataclass_fields__})
    return replace(Plan(**fields), criteria=criteria)
