"""Command arms: a fresh process per run, with only the named environment variables switched; the
figure is the process's wall time or a number its output prints (the --metric regex)."""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from strata_bench.ab.arms import Arm, RunFailed, Sample
from strata_bench.ab.metrics import OutputMissing, OutputSpec, read_metrics, read_same
from strata_bench.ab.plan import Plan
from strata_bench.ab.records import AbReport
from strata_bench.ab.runner import case_progress, run_ab
from strata_bench.ab.store import finish, finish_partial
from strata_bench.errors import InputError
from strata_bench.results.paths import provenance_directory
from strata_bench.results.store import ResultsWriter

METRIC_GROUP = "value"  # the named group --metric must define: (?P<value>...)
OUTPUT_TAIL_CHARS = 2000
KILL_GRACE_S = 5.0  # after SIGKILL, how long to wait for the pipe to close


@dataclass(frozen=True)
class CommandSpec:
    """How one arm runs its command: a fresh process per run."""

    argv: tuple[str, ...] | str  # a string only with shell=True
    env: Mapping[str, str | None] = field(default_factory=dict)  # None unsets the variable
    shell: bool = False
    metric: re.Pattern[str] | None = None  # the single-metric form (group `value`, last match)
    timeout: float | None = None
    metrics: tuple[OutputSpec, ...] = ()  # several metrics (strata_bench.ab.metrics); the first is `value`
    same: tuple[OutputSpec, ...] = ()  # output that must be identical in every run

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
    """An arm running `spec` once per call; fails at once (InputError) when its program is missing."""
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
    return sample_from_output(spec, _text(raw), wall, details)


def sample_from_output(spec: CommandSpec, text: str, wall: float, details: Mapping[str, Any]) -> Sample:
    """The run's figure(s) and identity captures from its output (RunFailed when a metric is missing)."""
    same = read_same(spec.same, text) if spec.same else {}
    if spec.metrics:
        try:
            values = read_metrics(spec.metrics, text)
        except OutputMissing as exc:
            raise RunFailed(str(exc), details) from None
        return Sample(next(iter(values.values())), details, values, same)
    if spec.metric is None:
        return Sample(wall, details, {}, same)
    return Sample(read_metric(spec.metric, text, details), details, {}, same)


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
    writer = ResultsWriter(provenance_directory(results_root, prov), "ab", prov) if results_root else None
    try:
        with case_progress(plan.total_runs, case, quiet) as on_run:
            outcome = run_ab(arm_a, arm_b, plan, writer, case, on_run)
    except BaseException:
        if writer is not None:
            finish_partial(writer)
        raise
    summary = finish(writer, [outcome]) if writer else None
    return AbReport((outcome,), summary, writer.records_path if writer else None)
