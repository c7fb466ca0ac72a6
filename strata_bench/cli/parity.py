"""`strata-bench parity`: bitwise and float64 parity for every case that matches the filters."""
from __future__ import annotations

from pathlib import Path

import click

from strata_bench.cli.devices import chosen_devices, device_names, progress
from strata_bench.cli.gpu_run import compilers_for_gpu_run
from strata_bench.cli.options import (device_option, junit_option, list_option, output_option, quiet_option,
                                      results_option, run_options)
from strata_bench.cli.sanitizing import sanitize_option
from strata_bench.errors import CheckFailed, KernelFault
from strata_bench.files import UserPath


@click.command("parity")
@run_options("parity")
@device_option()
@output_option()
@results_option("Where to keep the raw records and the summary (results/<device>/parity-*.json).")
@list_option
@click.option("--profile", is_flag=True,
              help="Print the seconds spent per phase (inputs, references, launches, comparisons; the compile "
                   "before the loop; beside it, the references' pool and the inputs and cached references made "
                   "ahead of the loop) to stderr.")
@click.option("--dump-failures", "dump_dir", type=UserPath(), metavar="DIR",
              help="For each failing case, write DIR/<case name, / and : as _>.npz (its host inputs, each "
                   "variant's outputs, the float64 references and their bounds; np.load(..., allow_pickle=False)) "
                   "and a .json beside it (the case, the failed checks, the command that reruns it). Nothing is "
                   "written when every case passes; the end of the run says where they went.")
@sanitize_option
@junit_option
@quiet_option
def command(spec, device_spec, output, results_dir, list_only, quiet, profile, dump_dir, sanitize, junit_path):
    """Check bitwise and float64 parity of kernel variants, case by case.

    Every variant runs twice over two poisons (an unwritten element fails), every variant is compared
    byte for byte with the baseline (first and worst difference, decoded), every column of a
    multi-column call with the 1-column call, and every output element with a float64 reference within
    the bound its arithmetic contract allows (a failure names the worst element and its |err|/bound).
    Every failure prints the one command that reruns that case alone.

    Exit codes: 0 all pass, 1 a check failed or a kernel faulted, 2 bad usage (a filter that matches
    nothing lists the families and formats), 77 no usable GPU (after selecting the cases).

    \b
    Examples:
        strata-bench parity
        strata-bench parity --family mmvq --format iq2_xxs,iq3_s -k n8
        strata-bench parity -o md > parity.md
        strata-bench parity --device all -o md   # every case on each GPU, counts per device
        strata-bench parity --kernels my_kernels/ --cases my_cases.py --family my_mmvq
        strata-bench parity --family mmvq --shape 4096x14336 --cols 1,8
        strata-bench parity --fixtures 'smollm2-ffn_down.iq*' --cols 1,4
        strata-bench parity --gguf model.gguf --tensor 'blk\\.(0|1|2|3|20|47)\\.ffn_(gate|up|down)'
        strata-bench parity --variants examples/toml_variant/variants.toml --family mmvq
        strata-bench parity --profile -q
        strata-bench parity -q --family q8_1 --junit parity.xml   # for a CI's test report
        strata-bench parity --family mmvq --dump-failures failures/   # then np.load('failures/<case>.npz')
        strata-bench parity -q --sanitize memcheck,racecheck,initcheck,synccheck
        strata-bench parity --sanitize initcheck --family dequant --format iq2_xs

    References are cached on disk (under $STRATA_CACHE_DIR/references, else
    ~/.cache/strata-bench/references), keyed by the case, its input bytes and the reference code;
    STRATA_REF_CACHE=off computes every one afresh.

    --sanitize launches the same cases again under compute-sanitizer, once per tool, each variant once
    (CuPy's pool off, so every array is its own allocation), two tools at a time: memcheck and initcheck
    every case, racecheck and synccheck only the variants whose kernels may use shared memory or a
    barrier. One line per finding, `TOOL: CASE [VARIANT]: KERNEL: ERROR`, then a line per tool with the
    cases it ran, its findings and the cases it skipped and why; the full reports are in
    results/<device>/sanitize-TOOL-*.log.
    """
    from strata_bench.runs.prepare import prepare
    from strata_bench.runs import Selection
    from strata_bench.runs.parity import ParityPlan, run_parity

    rerun = _rerun_command(spec)
    dump = _failure_dump(dump_dir, rerun)  # a bad folder is refused before any case is made or run
    prepared = prepare(spec)
    cases = prepared.cases
    # Said on stderr (never in --list's stdout): a lost fixtures folder or family shows as a smaller count.
    click.echo(_selection_line(cases), err=True)
    if list_only:
        from strata_bench.cli.listing import echo_cases

        return echo_cases(cases, spec.adds_variants)
    if _sanitize_child():
        from strata_bench.gpu.sanitize_child import run_child

        with compilers_for_gpu_run():
            return run_child(cases, chosen_devices(device_spec, len(cases), "run"), prepared.catalog)
    if sanitize:
        from strata_bench.cli.sanitizing import run_sanitize

        return run_sanitize(spec, sanitize, cases, prepared.catalog, results_dir, quiet)
    devices = chosen_devices(device_spec, len(cases), "run")
    selection = Selection(prepared.catalog, cases, devices, device_names(devices), Path(results_dir), spec)
    plan = ParityPlan(selection, rerun, dump, profile)
    with compilers_for_gpu_run():  # a variant's missing nvcc skips the run (77), as a missing GPU does
        report = run_parity(plan, None if quiet else progress, warn=lambda text: click.echo(text, err=True))
    _render(report, devices, output, rerun)
    _ci_outputs(report, devices, rerun, junit_path)
    if dump is not None:
        click.echo(_dump_line(dump, report.run), err=output != "table")
    if report.times is not None:
        _echo_profile(report)
    _raise_for_failures(report)


def _sanitize_child() -> bool:
    """This process is a `parity --sanitize` child: it launches its tool's plan, it checks nothing."""
    from strata_bench.gpu.sanitize import child_tool

    return child_tool() is not None


def _ci_outputs(report, devices, rerun, junit_path) -> None:
    """--junit FILE, and the markdown table appended to $GITHUB_STEP_SUMMARY where it is set."""
    from strata_bench.report import junit
    from strata_bench.report.live import parity_markdown

    if junit_path is not None:
        junit.write_junit(junit_path, "strata-bench parity", junit.parity_cases(report.run.results))
    notes = "".join(f"\n\nnote: {n}" for n in report.notes)
    junit.append_step_summary(f"### strata-bench parity: {len(report.run.results)} cases, {report.run.failures} "
                              f"failures\n\n{parity_markdown(report.run.results, report.counts, rerun)}{notes}")


def _echo_profile(report) -> None:
    click.echo(f"parity profile ({len(report.run.results)} cases):", err=True)
    for line in report.times.lines(report.wall):
        click.echo("  " + line, err=True)


def _raise_for_failures(report) -> None:
    run = report.run
    if report.faults:
        first = report.faults[0]
        raise KernelFault(f"parity: kernel fault in {first.case.name} on device {first.device}; "
                          f"{run.failures} of {len(run.results)} cases failed (details in {report.summary_path})")
    if run.failures:
        raise CheckFailed(f"parity: {run.failures} of {len(run.results)} cases failed "
                          f"(details in {report.summary_path})")


def _selection_line(cases) -> str:
    real = sum(case.data.startswith("fixture:") for case in cases)
    fixtures = len({case.data for case in cases if case.data.startswith("fixture:")})
    return f"{len(cases)} cases selected, {real} of them on real weights ({fixtures} fixtures)"


def _rerun_command(spec):
    """result -> the command line that reruns its case alone, on its device, selected as this run did."""
    from strata_bench.cases.rerun import rerun_command

    return lambda result: rerun_command(result.case, spec, result.device)


def _failure_dump(dump_dir, rerun):
    """The FailureDump of --dump-failures DIR (None without it); InputError for a folder it cannot use."""
    if dump_dir is None:
        return None
    from strata_bench.checks.dump import FailureDump, check_dump_folder

    return FailureDump(check_dump_folder(dump_dir), rerun, warn=lambda text: click.echo(text, err=True))


def _dump_line(dump, run) -> str:
    """Where --dump-failures put the failing cases (or that nothing failed), and which had nothing to dump."""
    if not dump.written and not run.failures:
        return f"--dump-failures: no case failed, nothing written to {dump.folder}"
    line = (f"failing cases dumped to {dump.folder}: {len(dump.written)} .npz (inputs, outputs, references) "
            f"with a .json each (the case, its failed checks, its rerun command)")
    faults = sum(r.status.value == "FAULT" for r in run.results)
    if faults:
        line += f"; {faults} faulted, not dumped (their outputs went with the CUDA context)"
    return line


def _render(report, devices, output, rerun=None) -> None:
    from strata_bench.report import live as render
    from strata_bench.report.sources import sources_markdown
    from strata_bench.runs.parity import record, summary

    run, counts, sources = report.run, report.counts, report.sources
    if output == "json":
        import json

        click.echo(json.dumps({"summary": summary(report, devices),
                               "cases": [record(r, rerun) for r in run.results]}, indent=2, default=str))
        return
    if output == "md":
        click.echo(render.parity_markdown(run.results, counts, rerun))
        if sources:
            click.echo("\n" + sources_markdown(sources))
    else:
        render.print_parity_table(run.results, rerun=rerun)
        for c in counts:
            click.echo(c.text())
        if sources:
            click.echo(sources_markdown(sources))
    for note in report.notes:
        click.echo(f"\nnote: {note}" if output == "md" else f"note: {note}")
    line = (f"{len(run.results)} cases, {run.failures} failures on {len(devices)} device"
            f"{'s' if len(devices) != 1 else ''}; results: {report.summary_path}")
    click.echo(line, err=output == "md")
