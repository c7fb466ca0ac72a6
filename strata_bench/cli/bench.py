"""`strata-bench bench`: micro-benchmarks of kernel variants (us/call, GB/s, fraction of the ceilings)."""
from __future__ import annotations

import os
from pathlib import Path

import click

from strata_bench.cli.devices import chosen_devices, device_names, progress
from strata_bench.cli.gpu_run import compilers_for_gpu_run
from strata_bench.cli.options import (FiniteFloat, device_option, junit_option, list_option, output_option,
                                      quiet_option, results_option, run_options)


@click.command("bench")
@run_options("bench")
@click.option("--hot", is_flag=True, help="Time with warm caches (one input copy) instead of rotating cold copies.")
@click.option("--budget", type=FiniteFloat(min=0, min_open=True), default=2.0, show_default=True,
              help="Seconds of trials per variant at most.")
@click.option("--profile", is_flag=True,
              help="After timing, profile one call of each timed row's variant (every kernel of its own it "
                   "launches) under Nsight Compute (ncu on PATH or $STRATA_NCU; clocks left as they are): "
                   "instructions per weight, DRAM bytes against the byte model, issue and DRAM utilisation of its "
                   "longest launch, and what binds it (read, issue, latency).")
@click.option("--rel-ci", type=FiniteFloat(min=0, min_open=True), default=0.01, show_default=True,
              help="Stop a variant's trials when the 95% CI of the median is within this fraction.")
@device_option()
@output_option()
@results_option()
@list_option
@junit_option
@quiet_option
def command(spec, hot, profile, budget, rel_ci, device_spec, output, results_dir, list_only, quiet, junit_path):
    """Time kernel variants: us per call, GB/s, fraction of the measured ceiling that bounds them.

    Each case runs its variants once at the timed shape and must agree bitwise before it is timed.
    Every copy's outputs are poisoned before the timed replays and must equal that checked result
    after them; a variant whose outputs differ, or whose time beats bytes / read ceiling, is
    rejected (exit 1), never shown as a speedup.
    Launches are captured in a CUDA graph and timed with events around replays; weights are kept cold
    by rotating through input copies totalling at least 3x the L2, each with its own buffers (unless
    --hot), and a case whose copies are not measurably colder on first replay than re-read is flagged
    WARM in the `cache` column. The fraction shown is of the one ceiling that bounds the family (read
    for a mat-vec, copy for a dequantization, none for a GEMM). The table has a row
    per call and a column per column count: old / new and the speedup. With --device all each GPU is
    timed on its own against its own ceilings (a row per device and call); a kernel fault stops only
    its device (exit 1 at the end).

    \b
    Examples:
        strata-bench bench --family mmvq --format iq2_xxs --cols 1,4,8
        strata-bench bench --family mmvq --shape 131072x8192 --cols 1,8 -o md
        strata-bench bench --family mmvq --format iq1_s --shape 131072x8192 --cols 1 --profile   # what binds it
        strata-bench bench --family mmvq --format q8_0 --device all   # each GPU timed on its own
        strata-bench bench --family q8_1 --junit bench.xml   # for a CI's test report
        strata-bench bench --variants examples/toml_variant/variants.toml --family mmvq --shape 131072x8192 --cols 1,8
        strata-bench bench --gguf model.gguf --tensor 'blk\\.0\\.ffn_down' --rows 0:4096 --family mmvq --cols 1,8
    """
    from strata_bench.runs.prepare import prepare
    from strata_bench.runs import Selection
    from strata_bench.runs.bench import BenchPlan, run_bench
    from strata_bench.runs.profile import PROFILE_CALL_ENV
    from strata_bench.timing.bench import TimingConfig

    prepared = prepare(spec)
    cases = prepared.cases
    if list_only:
        from strata_bench.cli.listing import echo_cases

        return echo_cases(cases, spec.adds_variants)
    devices = chosen_devices(device_spec, len(cases), "timed")
    plan = BenchPlan(Selection(prepared.catalog, cases, devices, device_names(devices), Path(results_dir), spec),
                     TimingConfig(hot=hot, rel_ci=rel_ci, budget_s=budget,
                                  check_through=os.environ.get(PROFILE_CALL_ENV, "")), profile=profile)
    with compilers_for_gpu_run():  # a variant's missing nvcc skips the run (77), as a missing GPU does
        report = run_bench(plan, None if quiet else progress)
    _render(report, output)
    _ci_outputs(report, junit_path)
    click.echo(f"{len(cases)} cases timed on {len(devices)} device(s); results: {report.summary_path}", err=True)
    _raise_for_fault(report.timings, report.summary_path)
    _raise_for_rejected([t for _, t in report.timings], [d for d, _ in report.timings])


def _render(report, output: str) -> None:
    from strata_bench.report import bench as benchtable

    click.echo(benchtable.render(report.records(), output,
                                 [f"device {d}: {c.text()}" for d, c in report.ceilings.items()]))
    for line in benchtable.device_lines(report.provenance.get("devices") or [], report.per_device):
        click.echo(line, err=True)


def _ci_outputs(report, junit_path) -> None:
    """--junit FILE, and the markdown table appended to $GITHUB_STEP_SUMMARY where it is set."""
    from strata_bench.report import bench as benchtable
    from strata_bench.report import junit

    if junit_path is not None:
        junit.write_junit(junit_path, "strata-bench bench", junit.bench_cases(report.records()))
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        junit.append_step_summary("### strata-bench bench\n\n" + benchtable.render(report.records(), "md"))


def _raise_for_fault(timings, path) -> None:
    from strata_bench.errors import KernelFault

    from strata_bench.timing.status import BenchStatus

    faults = [(d, t) for d, t in timings if t.status.kind is BenchStatus.KERNEL_FAULT]
    if faults:
        device, first = faults[0]
        raise KernelFault(f"bench: kernel fault in {first.case.name} on device {device}; the other devices' "
                          f"timings are kept (details in {path})")


def _raise_for_rejected(timings, devices: list[int] | None = None) -> None:
    """CheckFailed (exit 1) when a timed variant's outputs differ from the checked result or its time
    beats the roofline: its figures are not results. `devices` (one per timing) names the first's device."""
    from strata_bench.errors import CheckFailed
    rejected = [i for i, t in enumerate(timings) if t.status.rejected]
    if rejected:
        first = timings[rejected[0]]
        where = f" on device {devices[rejected[0]]}" if devices is not None else ""
        raise CheckFailed(f"{len(rejected)} timed variant(s) rejected; first: {first.case.name}{where}: "
                          f"{first.status}")
