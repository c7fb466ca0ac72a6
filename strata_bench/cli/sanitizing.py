"""`parity --sanitize TOOL[,TOOL]`: the option, and the run that starts parity again under compute-sanitizer
once per tool with the same selection (the reading of the report is runner/sanitize.py's)."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import click

from strata_bench.cli.options import check_quant_formats
from strata_bench.errors import CheckFailed, InputError, NoGpu

# The options of parity that select what runs; the child gets them as given, and nothing else (no
# output format, no --results, no --sanitize: the child must not start the sanitizer again).
SELECTION = ("families", "formats", "pattern", "kernels_dir", "cases_file", "device_spec", "shape", "cols_spec",
             "fixture_patterns", "gguf_file", "tensor_regex", "rows_spec", "ggml_tree", "ggml_b_tree", "variant_files")


def _parse(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    from strata_bench.runner import sanitize

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


def selection_args(ctx: click.Context, names: Sequence[str] = SELECTION) -> list[str]:
    """The selecting options of this command line as the child's arguments (each option's own spelling)."""
    params = {p.name: p for p in ctx.command.params if isinstance(p, click.Option)}
    args: list[str] = []
    for name in names:
        param, value = params.get(name), ctx.params.get(name)
        if param is None or value is None or value == () or value == "":
            continue
        flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        values = value if param.multiple else (value,)
        if name == "formats":
            quant = check_quant_formats(tuple(values))
            values = [",".join(quant)] if quant else []
        for v in values:
            args += [flag, str(v)]
    return args


def run_sanitize(ctx: click.Context, tools: Sequence[str], cases: Sequence[Any], device_spec: str, results_dir: str,
                 quiet: bool) -> None:
    """Each tool over the selected cases in a child parity; findings and a summary line per tool on stdout.
    ToolMissing or NoGpu (exit 77) where compute-sanitizer or a GPU is missing; CheckFailed on any
    finding or a run that went wrong."""
    from strata_bench.results.paths import device_directory
    from strata_bench.results.store import utc_stamp
    from strata_bench.runner import devices as gpu
    from strata_bench.runner import sanitize

    sanitizer = sanitize.find_sanitizer()
    try:
        devices = gpu.select_devices(device_spec)
    except NoGpu as exc:
        raise NoGpu(f"sanitize skipped: {str(exc).removeprefix('skipped: ')}; {len(cases)} cases selected, "
                    "none run") from None
    logs = device_directory(results_dir, gpu.device_name(devices[0]))
    logs.mkdir(parents=True, exist_ok=True)
    stamp = utc_stamp()
    findings = problems = 0
    with tempfile.TemporaryDirectory(prefix="strata-sanitize-") as scratch:
        child = [sys.executable, "-m", "strata_bench", "parity", *selection_args(ctx), "-q", "--results", scratch]
        for tool in tools:
            if not quiet:
                click.echo(f"{tool}: {len(cases)} cases under {sanitizer} ...", err=True)
            report = sanitize.run_tool(sanitizer, tool, child, logs / f"sanitize-{tool}-{stamp}.log")
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
