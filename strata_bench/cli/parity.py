"""`strata-bench parity`: bitwise and float64 parity for every case that matches the filters."""
from __future__ import annotations

from pathlib import Path

import click

from strata_bench.cli.options import (case_filter_options, device_option, make_filter, output_option, quiet_option,
                                      results_option, split_output_format)
from strata_bench.errors import CheckFailed, KernelFault, NoGpu


@click.command("parity")
@case_filter_options
@device_option()
@output_option()
@results_option("Where to keep the raw records and the summary (results/<device>/parity-*.json).")
@click.option("--list", "list_only", is_flag=True, help="List the selected cases and exit (no GPU needed).")
@click.option("--profile", is_flag=True,
              help="Print the seconds spent per phase (inputs, references, launches, comparisons) to stderr.")
@quiet_option
def command(families, formats, pattern, kernels_dir, cases_file, device_spec, output, results_dir, list_only, quiet,
            profile):
    """Check bitwise and float64 parity of kernel variants, case by case.

    Every variant runs twice over two poisons (an unwritten element fails), every variant is compared
    byte for byte with the baseline (first and worst difference, decoded), every column of a
    multi-column call with the 1-column call, and every output with a float64 reference within the
    tolerance its arithmetic contract allows. `--format md|json` is accepted as --output.

    Exit codes: 0 all pass, 1 a check failed or a kernel faulted, 2 bad usage (a filter that matches
    nothing lists the families and formats), 77 no usable GPU (after selecting the cases).

    \b
    Examples:
        strata-bench parity
        strata-bench parity --family mmvq --format iq2_xxs,iq3_s -k n8
        strata-bench parity --format md > parity.md
        strata-bench parity --kernels my_kernels/ --cases my_cases.py --family my_mmvq
        strata-bench parity --profile -q

    References are cached on disk (under $STRATA_CACHE_DIR/references, else
    ~/.cache/strata-bench/references), keyed by the case, its input bytes and the reference code;
    STRATA_REF_CACHE=off computes every one afresh.
    """
    from strata_bench.runner import loop as engine
    from strata_bench.runner import devices as gpu
    from strata_bench.checks.outcome import ParityRun, fault_result
    from strata_bench.checks.parity import CaseChecker
    from strata_bench.checks.phases import PhaseTimes

    formats, output = split_output_format(formats, output)
    cases = engine.prepare_cases(make_filter(families, formats, pattern), cases_file, kernels_dir)
    if list_only:
        for case in cases:
            click.echo(case.name)
        return
    try:
        devices = gpu.select_devices(device_spec)
    except NoGpu as exc:
        raise NoGpu(f"{exc}; {len(cases)} cases selected, none run") from None
    writer = _results_writer(Path(results_dir), devices)
    run = ParityRun()

    def keep(result) -> None:
        run.results.append(result)
        writer.append(result.to_record())

    from strata_bench.report.progress import progress_bar
    import time

    times = PhaseTimes() if profile else None
    started = time.perf_counter()
    with progress_bar("parity", total=len(cases) * len(devices), enabled=not quiet) as advance:
        try:
            engine.run_on_devices(cases, devices, CaseChecker(times), keep, fault_result, advance)
        finally:
            summary_path = writer.finish(run.summary(devices), run.failures)
    wall = time.perf_counter() - started
    _render(run, devices, output or "table", summary_path)
    if times is not None:
        click.echo(f"parity profile ({len(run.results)} cases):", err=True)
        for line in times.lines(wall):
            click.echo("  " + line, err=True)
    faults = run.summary(devices)["faults"]
    if faults:
        raise KernelFault(f"parity: kernel fault in {faults[0]}; {run.failures} of {len(run.results)} cases failed "
                          f"(details in {summary_path})")
    if run.failures:
        raise CheckFailed(f"parity: {run.failures} of {len(run.results)} cases failed (details in {summary_path})")


def _results_writer(results_dir: Path, devices: list[int]):
    from strata_bench.runner import devices as gpu
    from strata_bench.results import provenance
    from strata_bench.results.paths import device_directory
    from strata_bench.results.store import ResultsWriter

    name = gpu.device_name(devices[0])
    return ResultsWriter(device_directory(results_dir, name), "parity", provenance.collect(devices))


def _render(run, devices, output, summary_path) -> None:
    from strata_bench.report import live as render

    if output == "json":
        import json

        click.echo(json.dumps({"summary": run.summary(devices),
                               "cases": [r.to_record() for r in run.results]}, indent=2, default=str))
        return
    text = render.parity_markdown(run.results) if output == "md" else None
    if text is not None:
        click.echo(text)
    else:
        render.print_parity_table(run.results)
    line = (f"{len(run.results)} cases, {run.failures} failures on {len(devices)} device"
            f"{'s' if len(devices) != 1 else ''}; results: {summary_path}")
    click.echo(line, err=output == "md")
