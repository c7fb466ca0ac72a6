"""`parity --sanitize TOOL[,TOOL]`: the option, and the run that starts parity again under compute-sanitizer
once per tool with the same selection (the reading of the report is gpu/sanitize.py's)."""
from __future__ import annotations

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
        help="Run the selected cases under NVIDIA compute-sanitizer, once per tool (memcheck, racecheck, "
             "initcheck, synccheck): one line per finding naming the tool, case and kernel; exit 1 on any "
             "finding, 77 where compute-sanitizer or a GPU is missing.")(func)


def run_sanitize(spec: Any, tools: Sequence[str], cases: Sequence[Any], results_dir: str, quiet: bool) -> None:
    """Each tool over the selected cases in a child parity, given the run's own declared options
    (spec.argv()); findings and a summary line per tool on stdout.
    ToolMissing or NoGpu (exit 77) where compute-sanitizer or a GPU is missing; CheckFailed on any
    finding or a run that went wrong."""
    from strata_bench.results.paths import device_directory
    from strata_bench.results.store import utc_stamp
    from strata_bench.gpu import devices as gpu
    from strata_bench.gpu import sanitize
    from strata_bench.report.progress import progress_bar

    sanitizer = sanitize.find_sanitizer()
    try:
        devices = gpu.select_devices(spec.device)
    except NoGpu as exc:
        raise NoGpu(f"sanitize skipped: {str(exc).removeprefix('skipped: ')}; {len(cases)} cases selected, "
                    "none run") from None
    logs = device_directory(results_dir, gpu.device_name(devices[0]))
    logs.mkdir(parents=True, exist_ok=True)
    stamp = utc_stamp()
    findings = problems = 0
    with tempfile.TemporaryDirectory(prefix="strata-sanitize-") as scratch:
        child = [sys.executable, "-m", "strata_bench", "parity", *spec.argv(), "-q", "--results", scratch]
        for tool in tools:
            if not quiet:
                click.echo(f"{tool}: {len(cases)} cases under {sanitizer} ...", err=True)
            with progress_bar(tool, len(cases), enabled=not quiet) as advance:
                report = sanitize.run_tool(sanitizer, tool, child, logs / f"sanitize-{tool}-{stamp}.log",
                                           on_case=lambda case: advance(f"{tool}: {case}"))
            sanitize.raise_for_child(report)
            lines = sanitize.problems(report)
            for finding in report.findings:
                click.echo(finding.line())
            for line in lines:
                click.echo(line)
            click.echo(sanitize.summary_line(report))
            findings += len(report.findings)
            problems += len(lines)
    if findings or problems:
        what = ", ".join(part for part in (f"{findings} finding{'s' if findings != 1 else ''}" if findings else "",
                                           f"{problems} run problem{'s' if problems != 1 else ''}" if problems else "")
                         if part)
        raise CheckFailed(f"sanitize: {what} under {', '.join(tools)} (logs in {Path(logs)})")
