"""`parity --sanitize TOOL[,TOOL]`: the option, and the run that starts parity again under compute-sanitizer
once per tool with the same selection and the tool's plan (what it can see: gpu/sanitize_scope.py; the
reading of the report is gpu/sanitize.py's)."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import click

from strata_bench.errors import CheckFailed, InputError, NoGpu


def _parse(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    from strata_bench.gpu import sanitize

    if value is None:
        return ()
    try:
        tools = sanitize.parse_tools(value)
    except InputError as exc:
        raise click.BadParameter(str(exc).removeprefix("--sanitize: "), ctx, param) from None
    if sanitize.child_tool() is not None:
        raise click.BadParameter(f"this process already runs under {sanitize.SANITIZER} "
                                 f"({sanitize.CHILD_ENV} is set)", ctx, param)
    return tools


def sanitize_option(func):
    """--sanitize TOOL[,TOOL] into `sanitize` (a tuple of tool names, empty without the option); an unknown
    tool is a usage error, before anything runs."""
    return click.option(
        "--sanitize", "sanitize", metavar="TOOL[,TOOL]", callback=_parse, expose_value=True,
        help="Launch the selected cases under NVIDIA compute-sanitizer, once per tool (memcheck, racecheck, "
             "initcheck, synccheck), each variant once; racecheck and synccheck skip the variants whose kernels "
             "use no shared memory and no barrier. One line per finding naming the tool, case, variant and "
             "kernel; exit 1 on any finding, 77 where compute-sanitizer or a GPU is missing.")(func)


def run_sanitize(spec: Any, tools: Sequence[str], cases: Sequence[Any], catalog: Any, results_dir: str,
                 quiet: bool) -> None:
    """Each tool over what it can see of the selected cases (gpu/sanitize_scope.py's plan), in a child
    parity given the run's own declared options (spec.argv()) and its plan, two tools at a time; findings
    and a summary line per tool on stdout, in the order the tools were given.
    ToolMissing or NoGpu (exit 77) where compute-sanitizer or a GPU is missing; CheckFailed on any
    finding or a run that went wrong."""
    from strata_bench.gpu import devices as gpu
    from strata_bench.gpu import sanitize

    sanitizer = sanitize.find_sanitizer()
    try:
        devices = gpu.select_devices(spec.device)
    except NoGpu as exc:
        raise NoGpu(f"sanitize skipped: {str(exc).removeprefix('skipped: ')}; {len(cases)} cases selected, "
                    "none run") from None
    logs = _log_folder(results_dir, gpu.device_name(devices[0]))
    with tempfile.TemporaryDirectory(prefix="strata-sanitize-") as scratch:
        plans = _plans(tools, cases, catalog, devices[0])
        reports = _run(sanitizer, plans, child_command(spec), Path(scratch), logs, quiet)
    findings = problems = 0
    for plan in plans:
        report = reports.get(plan.tool)
        if report is None:  # it can see none of the cases: no child started
            click.echo(f"{plan.tool}: 0 cases, not run{plan.skip_note()}")
            continue
        sanitize.raise_for_child(report)
        findings += len(report.findings)
        problems += _echo_report(report, plan)
    if findings or problems:
        raise CheckFailed(f"sanitize: {_counted(findings, 'finding')}{', ' if findings and problems else ''}"
                          f"{_counted(problems, 'run problem')} under {', '.join(tools)} (logs in {logs})")


def child_command(spec: Any) -> list[str]:
    """The child: parity with the run's own selection, quiet (the sanitizer wraps it)."""
    return [sys.executable, "-m", "strata_bench", "parity", *spec.argv(), "-q"]


def _log_folder(results_dir: str, device_name: str) -> Path:
    from strata_bench.results.paths import device_directory

    logs = device_directory(results_dir, device_name)
    logs.mkdir(parents=True, exist_ok=True)
    return Path(logs)


def _plans(tools: Sequence[str], cases: Sequence[Any], catalog: Any, device: int) -> list:
    from strata_bench.gpu import sanitize_scope
    from strata_bench.kernels.build import device_arch

    return sanitize_scope.plans(tools, cases, catalog, device_arch(device))


def _run(sanitizer: Path, plans: Sequence[Any], child: list[str], scratch: Path, logs: Path, quiet: bool) -> dict:
    """Every tool's child with its plan file, a progress bar per tool (the cases it runs): tool -> report, for
    the tools that have a case to run."""
    from strata_bench.gpu import sanitize
    from strata_bench.gpu.sanitize_scope import PLAN_ENV
    from strata_bench.report.progress import progress_bars
    from strata_bench.results.store import utc_stamp

    stamp = utc_stamp()
    plans = [plan for plan in plans if plan.runs]
    runs = [(plan.tool, child, logs / f"sanitize-{plan.tool}-{stamp}.log",
             {**os.environ, PLAN_ENV: str(plan.write(scratch / f"plan-{plan.tool}.json"))}) for plan in plans]
    if not quiet:
        for plan in plans:
            click.echo(f"{plan.tool}: {len(plan.runs)} cases, {plan.launches} launches under {sanitizer} ...",
                       err=True)
    with progress_bars({plan.tool: len(plan.runs) for plan in plans}, enabled=not quiet) as advance:
        reports = sanitize.run_tools(sanitizer, runs, on_case=lambda tool, case: advance(tool, f"{tool}: {case}"))
    return {report.tool: report for report in reports}


def _echo_report(report: Any, plan: Any) -> int:
    """A tool's findings, its run's problems and its summary line; how many problems."""
    from strata_bench.gpu import sanitize

    lines = sanitize.problems(report)
    for line in [*(f.line() for f in report.findings), *lines, sanitize.summary_line(report, plan.skip_note())]:
        click.echo(line)
    return len(lines)


def _counted(count: int, what: str) -> str:
    return f"{count} {what}{'s' if count != 1 else ''}" if count else ""
