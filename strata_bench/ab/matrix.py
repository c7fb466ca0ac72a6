"""A command A/B over a parameter matrix, and the session around it (setup, cleanup, interruption).

`--param NAME=V1,V2` (repeatable) makes one combination per value (the product over names); `{NAME}`
is substituted into the commands, the hooks, the server command and the --env-a/--env-b values.
Every combination is its own case with its own statistics; the combinations run interleaved pair by
pair (strata_bench.ab.runner.run_interleaved), so drift over a session does not fall on one value.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from typing import TYPE_CHECKING

from strata_bench.ab.plan import Plan
from strata_bench.ab.process import AbInterrupted, Terminated, ending_signals
from strata_bench.errors import InputError, PortInUse
from strata_bench.results.paths import provenance_directory
from strata_bench.results.store import ResultsWriter

if TYPE_CHECKING:  # the runner brings scipy: imported once the runs start, so a usage error stays fast
    from strata_bench.ab.records import AbReport

_PARAM = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<values>.+)$")


@dataclass(frozen=True)
class Combination:
    """One case of the matrix: its name, parameter values and the two arms' command specs."""

    case: str
    params: Mapping[str, str]
    spec_a: Any  # CommandSpec (typed loosely: strata_bench.ab.command imports this module)
    spec_b: Any


def parse_params(items: Sequence[str]) -> dict[str, list[str]]:
    """`NAME=V1,V2` per item -> {NAME: [V1, V2]}; names distinct, values non-empty and distinct."""
    out: dict[str, list[str]] = {}
    for item in items:
        m = _PARAM.match(item)
        if not m:
            raise InputError(f"--param must be NAME=V1,V2,..., got {item!r}")
        values = m.group("values").split(",")
        if any(not v for v in values) or len(set(values)) != len(values):
            raise InputError(f"--param values must be non-empty and distinct, got {item!r}")
        if m.group("name") in out:
            raise InputError(f"--param {m.group('name')!r} is given twice")
        out[m.group("name")] = values
    return out


MAX_COMBINATIONS = 1000  # each is a case with its own schedule: 2000 x 2000 values ran out of memory


def scan(name: str, low: str, high: str, step: str | None = None) -> list[str]:
    """`-P NAME MIN MAX [--step S]`: MIN, MIN+S, ... up to MAX (S 1 by default), as the decimals were
    written (0.1 steps stay 0.1, 0.2, 0.3: decimal arithmetic, not binary floats)."""
    from decimal import Decimal, InvalidOperation

    try:
        lo, hi, by = Decimal(low), Decimal(high), Decimal(step or "1")
    except InvalidOperation:
        raise InputError(f"-P {name} {low} {high}{f' --step {step}' if step else ''}: not numbers") from None
    if not all(x.is_finite() for x in (lo, hi, by)) or by <= 0 or hi < lo:
        raise InputError(f"-P {name} {low} {high}: need finite MIN <= MAX and --step > 0, got step {by}")
    count = int((hi - lo) / by) + 1
    if count > MAX_COMBINATIONS:
        raise InputError(f"-P {name} {low} {high} makes {count} values, more than {MAX_COMBINATIONS}")
    return [str(lo + i * by) for i in range(count)]


def combinations(params: Mapping[str, Sequence[str]]) -> list[dict[str, str]]:
    """Every combination, the first name varying slowest; [{}] without parameters. InputError past
    MAX_COMBINATIONS, counted before any is made."""
    names = list(params)
    count = math.prod(len(params[n]) for n in names)
    if count > MAX_COMBINATIONS:
        sizes = " x ".join(f"{len(params[n])} {n}" for n in names)
        raise InputError(f"--param makes {count} combinations ({sizes}), more than {MAX_COMBINATIONS}")
    return [dict(zip(names, values)) for values in itertools.product(*(params[n] for n in names))]


def substitute(text: str, values: Mapping[str, str], known: Sequence[str] = ()) -> str:
    """Replace `{NAME}` by its value; an unknown `{NAME}` that looks like a parameter is an error."""
    def one(m: re.Match) -> str:
        name = m.group(1)
        if name in values:
            return values[name]
        if known and name not in known:
            raise InputError(f"{{{name}}} is not a --param (known: {', '.join(known)}) in {text!r}")
        return m.group(0)

    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", one, text)


def case_name(stem: str, values: Mapping[str, str]) -> str:
    """'command' or 'command decode=32 prompt=512'."""
    return " ".join([stem] + [f"{k}={v}" for k, v in values.items()])


@dataclass(frozen=True)
class CommandLines:
    """What the command-line options say about the arms, before parameters are substituted."""

    a: str | None = None  # --a
    b: str | None = None  # --b
    args: tuple[str, ...] = ()  # the command after --
    env_a: tuple[str, ...] = ()
    env_b: tuple[str, ...] = ()
    shell: bool = False
    prepare: str | None = None
    conclude: str | None = None
    server: str | None = None
    ready: str | None = None
    ready_port: int | None = None
    ready_timeout: float = 60.0
    names: tuple[str, ...] = ()  # -n/--name: A's, then B's
    ignore_failure: bool = False
    show_output: bool = False


def make_combinations(lines: CommandLines, params: Mapping[str, Sequence[str]], timeout: float | None,
                      metrics=(), same=(), stem: str = "command") -> list[Combination]:
    """One Combination per parameter combination, with `{NAME}` substituted everywhere it may appear."""
    from strata_bench.ab.command import CommandSpec, command_argv, parse_env
    from strata_bench.ab.process import ServerSpec

    if lines.args and (lines.a or lines.b):
        raise InputError("give either a command after -- (arms differ by --env-a/--env-b) or --a/--b, not both")
    if not lines.args and not (lines.a and lines.b):
        raise InputError("nothing to run: give a command after -- or both --a 'CMD' and --b 'CMD' "
                         "(or --family F for kernel variants)")
    ready = _ready_regex(lines)
    known = list(params)
    out = []
    for values in combinations(params):
        def sub(text, values=values):
            return None if text is None else substitute(text, values, known)

        if lines.args:
            line = sub(" ".join(lines.args)) if lines.shell else tuple(sub(a) for a in lines.args)
            argv = (line, line)
        else:
            argv = (command_argv(sub(lines.a), lines.shell), command_argv(sub(lines.b), lines.shell))
        server = None if lines.server is None else ServerSpec(sub(lines.server), ready, lines.ready_port,
                                                              lines.ready_timeout)
        envs = (parse_env([sub(e) for e in lines.env_a]), parse_env([sub(e) for e in lines.env_b]))
        names = tuple(lines.names) + (None, None)
        specs = [CommandSpec(arg, env, lines.shell, None, timeout, tuple(metrics), tuple(same),
                             sub(lines.prepare), sub(lines.conclude), server, ignore_failure=lines.ignore_failure,
                             show_output=lines.show_output, name=name) for arg, env, name in zip(argv, envs, names)]
        out.append(Combination(case_name(stem, values), values, *specs))
    return out


def _ready_regex(lines: CommandLines):
    if lines.server is None:
        if lines.ready or lines.ready_port:
            raise InputError("--ready and --ready-port need --server CMD")
        return None
    if bool(lines.ready) == bool(lines.ready_port):
        raise InputError("--server needs exactly one of --ready REGEX and --ready-port N")
    if lines.ready is None:
        return None
    try:
        return re.compile(lines.ready)
    except (re.error, OverflowError) as exc:  # OverflowError: a repetition count past what re can hold
        raise InputError(f"--ready is not a valid regex ({exc}): {lines.ready!r}") from None


def refuse_busy_ports(combos: Sequence[Combination]) -> None:
    """PortInUse when a --ready-port is held before the first run: a leftover server there would answer
    every request, and the A/B would compare that one server with itself."""
    from strata_bench.ab.ports import holder

    servers = [s.server for c in combos for s in (c.spec_a, c.spec_b) if s.server is not None]
    for port in sorted({s.ready_port for s in servers if s.ready_port is not None}):
        busy = holder(port)
        if busy:
            raise PortInUse(f"--ready-port {port} is already in use by {busy}: stop it, or give the server "
                            f"another port")


def run_matrix(combos: Sequence[Combination], plan: Plan, results_root: Path | None,
               provenance: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None, progress=None,
               setup: str | None = None, cleanup: str | None = None) -> AbReport:
    """Run every combination interleaved pair by pair; setup once first, cleanup once last.

    From the first record on, Ctrl-C, SIGTERM and SIGHUP (also during --setup and --cleanup) end the
    running process tree, write the summary of what finished (interrupted: true), run --cleanup, and
    raise AbInterrupted."""
    from strata_bench.ab.command import command_arm

    arms = [(command_arm("A", c.spec_a), command_arm("B", c.spec_b)) for c in combos]
    refuse_busy_ports(combos)
    # Checked: now the statistics (scipy) are loaded.
    from strata_bench.ab.records import AbReport
    from strata_bench.ab.store import finish

    # A callable is called here, after the checks: collecting provenance probes the GPU and packages.
    prov = _provenance(combos, plan, provenance() if callable(provenance) else provenance)
    writer = ResultsWriter(provenance_directory(results_root, prov), "ab", prov) if results_root else None
    with ending_signals():
        outcomes = _session(combos, arms, plan, writer, progress, setup, cleanup)
    summary = finish(writer, outcomes) if writer else None
    return AbReport(tuple(outcomes), summary, writer.records_path if writer else None)


def _provenance(combos: Sequence[Combination], plan: Plan, base: Mapping[str, Any] | None) -> dict[str, Any]:
    prov = dict(base or {})
    first = combos[0]
    prov["ab"] = {"A": first.spec_a.describe(), "B": first.spec_b.describe(), "order": plan.order, "seed": plan.seed}
    if len(combos) > 1 or first.params:
        prov["ab"]["params"] = [dict(c.params) for c in combos]
    return prov


def _session(combos, arms, plan: Plan, writer: ResultsWriter | None, progress, setup: str | None,
             cleanup: str | None) -> list:
    """The plan records, --setup, the runs and --cleanup; after an interruption or a crash, the partial
    summary and --cleanup, then AbInterrupted (or the crash)."""
    from strata_bench.ab.store import finish, finish_partial

    try:
        outcomes = _runs(combos, arms, plan, writer, progress, setup)
    except BaseException as exc:  # noqa: BLE001 - re-raised below as AbInterrupted, after the summary
        stop = exc
        summary = finish_partial(writer) if writer is not None else None
        try:
            _cleanup(cleanup, quietly=True)  # the interruption or crash in flight is the news, not the cleanup
        except KeyboardInterrupt as again:  # a signal during the cleanup of a crash
            stop = again
        stopped = _stopped(stop, writer, summary)
        if stopped is stop:  # `raise e from e` would make e its own cause: a chain that loops for ever
            raise stop
        raise stopped from stop
    try:
        _cleanup(cleanup)
    except KeyboardInterrupt as exc:  # every run finished: the summary is whole, the cleanup was cut short
        raise _stopped(exc, writer, finish(writer, outcomes) if writer else None) from exc
    return outcomes


def _runs(combos, arms, plan: Plan, writer: ResultsWriter | None, progress, setup: str | None) -> list:
    from strata_bench.ab.command import setup_hook
    from strata_bench.ab.runner import CaseRun, case_progress, run_interleaved

    total = plan.total_runs * len(combos)
    label = combos[0].case if len(combos) == 1 else f"{len(combos)} combinations"
    with case_progress(total, label, progress) as on_run:
        # The plan records first, so a session stopped during --setup still leaves a readable summary.
        runs = [CaseRun(a, b, replace(plan, params=tuple(c.params.items())), writer, c.case, on_run)
                for c, (a, b) in zip(combos, arms)]
        setup_hook(setup, "--setup")
        return run_interleaved(runs)


def _cleanup(command: str | None, quietly: bool = False) -> None:
    from strata_bench.ab.command import setup_hook

    try:
        setup_hook(command, "--cleanup")
    except InputError:
        if not quietly:
            raise


def _stopped(exc: BaseException, writer: ResultsWriter | None, summary: Path | None) -> BaseException:
    """What a stopped session raises: AbInterrupted for a signal (with the paths written), else `exc`."""
    if not isinstance(exc, KeyboardInterrupt):
        return exc
    return AbInterrupted(str(writer.records_path) if writer else None, str(summary) if summary else None,
                         exc.signum if isinstance(exc, Terminated) else None)
