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

import psutil
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from strata_bench.ab.arms import Arm, RunFailed, Sample
from strata_bench.ab.errorline import first_error_line
from strata_bench.ab.metrics import OutputMissing, OutputSpec, output_text, read_metrics, read_same
from strata_bench.ab.guard import spawn
from strata_bench.ab.ports import holder
from strata_bench.ab.process import Server, ServerFailed, ServerSpec, run_hook, tree
from strata_bench.errors import InputError

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
    prepare: str | None = None  # shell command before each run (the arm's environment)
    conclude: str | None = None  # shell command after each run
    server: ServerSpec | None = None  # a fresh server per run; the command is then its client
    ignore_failure: bool = False  # a nonzero exit code is recorded, not a failed run (hyperfine's -i)
    name: str | None = None  # -n/--name: what the tables call this arm beside its label
    show_output: bool = False  # echo each run's output (and its server's) to stderr as it finishes

    def describe(self) -> dict[str, Any]:
        argv = self.argv if isinstance(self.argv, str) else list(self.argv)
        body = {"argv": argv, "env": dict(self.env), "shell": self.shell}
        body.update({k: v for k, v in (("prepare", self.prepare), ("conclude", self.conclude),
                                       ("server", self.server.command if self.server else None),
                                       ("name", self.name)) if v})
        return body


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
    except (re.error, OverflowError) as exc:  # OverflowError: a repetition count past what re can hold
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
    """Run once: --prepare, a fresh --server (until ready), the command, the server stopped (its whole
    tree), --conclude. The value is the metric from the command's (and the server's) output, or the
    command's wall time in seconds."""
    env = _arm_env(spec.env)
    cpu = _children_cpu()
    if spec.prepare:
        _hook("--prepare", spec.prepare, env, spec.timeout)
    server = None
    try:
        if spec.server is not None:
            server = _start_server(spec.server, env)
        proc, raw, wall = _run_client(spec, env)
        server_text = server.stop() if server else ""
        server_read = server.output() if server else ""
        server = None
    finally:
        if server is not None:
            server.stop()  # the run failed or was interrupted: the server's tree goes too
        if spec.conclude:
            _hook("--conclude", spec.conclude, env, spec.timeout)
    details = {**_details(proc, raw, wall), **_cpu_since(cpu)}
    if server_text:
        details["server_tail"] = server_text[-OUTPUT_TAIL_CHARS:]
    if spec.show_output:
        _show(_text(raw), server_text)
    if proc.returncode != 0 and not spec.ignore_failure:
        raise RunFailed(f"exit code {proc.returncode}", _with_error_line(details, _text(raw), server_text))
    # Read undecoded, as identity compares bytes; the tails above are for display.
    text = output_text(raw) + ("\n" + server_read if server_read else "")
    return sample_from_output(spec, text, wall, details)


def _run_client(spec: CommandSpec, env: Mapping[str, str]) -> tuple[subprocess.Popen, bytes, float]:
    """The arm's command itself, timed; a timeout or an interruption ends its whole process tree."""
    started = time.perf_counter()
    try:
        proc = spawn(spec.argv, env, shell=spec.shell)
    except OSError as exc:
        raise RunFailed(f"cannot start: {exc}") from None
    try:
        raw, _ = proc.communicate(timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        raw = _kill(proc)
        wall = time.perf_counter() - started
        raise RunFailed(f"timed out after {spec.timeout:g} s (process tree killed)",
                        _details(proc, raw, wall)) from None
    except BaseException:
        _kill(proc)  # Ctrl-C or SIGTERM: take the whole tree down, then let the runner record it
        raise
    return proc, raw or b"", time.perf_counter() - started


def _hook(option: str, command: str, env: Mapping[str, str], timeout: float | None) -> None:
    code, out = run_hook(command, env, timeout)
    if code != 0:
        why = "timed out" if code is None else f"exit code {code}"
        raise RunFailed(f"{option} failed ({why}): {command}", {"output_tail": out[-OUTPUT_TAIL_CHARS:]})


def _start_server(spec: ServerSpec, env: Mapping[str, str]) -> Server:
    if spec.ready_port is not None:
        busy = holder(spec.ready_port)
        if busy:  # something outside this run took the port since the start: this run's server cannot
            raise RunFailed(f"port {spec.ready_port} is in use by {busy} before the server started")
    try:
        server = Server(spec, env)
    except OSError as exc:
        raise RunFailed(f"server cannot start: {exc}") from None
    try:
        server.wait_ready()
    except ServerFailed as exc:
        everything = server.stop()  # the error is often early, the tail only says it shut down
        raise RunFailed(exc.reason, _with_error_line({"output_tail": exc.tail, "server_tail": exc.tail},
                                                     everything)) from None
    except BaseException:
        server.stop()
        raise
    return server


def _children_cpu() -> tuple[float, float]:
    """User and system seconds of every child process this process has waited for so far (psutil)."""
    times = psutil.Process().cpu_times()
    return times.children_user, times.children_system


def _cpu_since(before: tuple[float, float]) -> dict[str, float]:
    """The run's CPU: what its processes (client, server, hooks, their waited-for children) used, as the
    kernel accounts a process when it is waited for."""
    user, system = _children_cpu()
    return {"cpu_user_s": round(user - before[0], 6), "cpu_system_s": round(system - before[1], 6)}


def _show(client: str, server: str) -> None:
    """--show-output: the run's output on stderr, the server's after the client's."""
    import click

    for who, text in (("output", client), ("server output", server)):
        if text.strip():
            click.echo(f"--- {who} ---\n{text.rstrip()}", err=True)


def _with_error_line(details: dict[str, Any], *texts: str) -> dict[str, Any]:
    """`details` with the first error-looking line of the whole output (the tails keep only the end)."""
    line = first_error_line(texts)
    return {**details, "error_line": line[:OUTPUT_TAIL_CHARS]} if line else details


def sample_from_output(spec: CommandSpec, text: str, wall: float, details: Mapping[str, Any]) -> Sample:
    """The run's figure(s) and identity captures from its output (RunFailed when a metric is missing)."""
    try:
        same = read_same(spec.same, text) if spec.same else {}
        values = read_metrics(spec.metrics, text) if spec.metrics else {}
    except OutputMissing as exc:
        raise RunFailed(str(exc), details) from None
    if spec.metrics:
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
    """SIGKILL the run's process tree (its group, it has its own session, and every descendant psutil
    finds, even one that left the group), and collect what it printed."""
    for child in tree(proc.pid)[1:]:
        with contextlib.suppress(psutil.Error):
            child.kill()
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


def setup_hook(command: str | None, option: str) -> None:
    """--setup / --cleanup: once, in this process's environment; a failure is a usage-level error."""
    if not command:
        return
    code, out = run_hook(command, os.environ, None)
    if code != 0:
        tail = out.strip().splitlines()[-1:]
        said = f" | {tail[0][:200]}" if tail else ""  # a silent hook has no last line to show
        raise InputError(f"{option} failed (exit code {code}): {command}{said}")
