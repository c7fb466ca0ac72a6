"""`strata-bench bench`: micro-benchmarks of kernel variants (us/call, GB/s, fraction of the ceilings)."""
from __future__ import annotations

from pathlib import Path

import click

from strata_bench.cli.options import (FiniteFloat, case_filter_options, case_request_options, device_option,
                                      list_option, make_filter, output_option, quiet_option, results_option,
                                      split_output_format)
from strata_bench.errors import NoGpu


@click.command("bench")
@case_filter_options
@case_request_options
@click.option("--hot", is_flag=True, help="Time with warm caches (one input copy) instead of rotating cold copies.")
@click.option("--budget", type=FiniteFloat(min=0, min_open=True), default=2.0, show_default=True,
              help="Seconds of trials per variant at most.")
@click.option("--rel-ci", type=FiniteFloat(min=0, min_open=True), default=0.01, show_default=True,
              help="Stop a variant's trials when the 95% CI of the median is within this fraction.")
@device_option()
@output_option()
@results_option()
@list_option
@quiet_option
def command(families, formats, pattern, kernels_dir, cases_file, request, hot, budget, rel_ci,
            device_spec, output, results_dir, list_only, quiet):
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
        strata-bench bench --family mmvq --shape 131072x8192 --cols 1,8 --format md
        strata-bench bench --family mmvq --format q8_0 --device all   # each GPU timed on its own
        strata-bench bench --variants examples/toml_variant/variants.toml --family mmvq --shape 131072x8192 --cols 1,8
        strata-bench bench --gguf model.gguf --tensor 'blk\\.0\\.ffn_down' --rows 0:4096 --family mmvq --cols 1,8
    """
    from strata_bench.runner import loop as engine
    from strata_bench.runner import devices as gpu
    from strata_bench.timing.bench import TimingConfig, bench_case
    from strata_bench.timing.ceilings import measure_ceilings, remeasure_ceilings

    formats, output = split_output_format(formats, output)
    cases = engine.prepare_cases(make_filter(families, formats, pattern), cases_file, kernels_dir, purpose="bench",
                                 request=request)
    if list_only:
        from strata_bench.cli.listing import echo_cases

        echo_cases(cases, bool(request.variants))
        return
    try:
        devices = gpu.select_devices(device_spec)
    except NoGpu as exc:
        raise NoGpu(f"{exc}; {len(cases)} cases selected, none timed") from None
    cfg = TimingConfig(hot=hot, rel_ci=rel_ci, budget_s=budget)
    names = {d: gpu.device_name(d) for d in devices}
    writer = _writer(Path(results_dir), devices, names, cfg)
    timings: list[tuple[int, object]] = []  # (device, Timing) in arrival order
    ceilings: dict[int, object] = {}  # each device's own, measured on it (inside its context) before its first case

    def per_case(family, case, kernels, device):
        ceilings[device] = measure_ceilings(device)
        return device, bench_case(family, case, kernels, device, cfg, ceilings[device],
                                  remeasure=lambda: remeasure_ceilings(device))

    def keep(result):
        device, case_timings = result
        for timing in case_timings:
            timings.append((device, timing))
            writer.append({**timing.to_record(), "device": device})

    def on_fault(case, device, exc, seconds):
        # The device's context is gone: its remaining cases are skipped, the other devices still run.
        return device, fault_timings(case, exc)

    from strata_bench.report.progress import progress_bar
    with progress_bar("bench", total=len(cases) * len(devices), enabled=not quiet) as advance:
        try:
            engine.run_on_devices(cases, devices, per_case, keep, on_fault, advance)
        finally:
            # Each device reached has its ceilings in this process (re-measured ones included), so
            # measure_ceilings only reads them back here; a device never reached has none.
            measured = {d: measure_ceilings(d) for d in ceilings}
            per_device = _per_device(devices, names, timings, measured)
            path = writer.finish({"timings": len(timings), "hot": hot, "per_device": per_device,
                                  "ceilings": {str(d): c.to_dict() for d, c in measured.items()}},
                                 sum(t.status != "timed" for _, t in timings))
    from strata_bench.report import bench as benchtable
    click.echo(benchtable.render([{**t.to_record(), "device": d} for d, t in timings], output or "table",
                                 [f"device {d}: {c.text()}" for d, c in measured.items()]))
    for line in benchtable.device_lines(writer.provenance.get("devices") or [], per_device):
        click.echo(line, err=True)
    click.echo(f"{len(cases)} cases timed on {len(devices)} device(s); results: {path}", err=True)
    _raise_for_fault(timings, path)
    _raise_for_rejected([t for _, t in timings], [d for d, _ in timings])


def fault_timings(case, exc) -> list:
    """A row per variant of a case whose kernel faulted: no samples, the fault as its status."""
    import math

    from strata_bench.timing.bench import Timing
    from strata_bench.timing.ceilings import Ceilings

    return [Timing(case, v, (), 0, 0, 0, 0, Ceilings(math.nan, math.nan), status=f"{KERNEL_FAULT}: {exc}")
            for v in case.variants]


KERNEL_FAULT = "kernel fault"


def _per_device(devices, names, timings, ceilings) -> list[dict]:
    """Each device's share of the run: its name, timings, rows not timed, fault, and its own ceilings."""
    out = []
    for d in devices:
        mine = [t for dev, t in timings if dev == d]
        fault = next((t.status for t in mine if t.status.startswith(KERNEL_FAULT)), None)
        out.append({"device": d, "name": names[d], "timings": len(mine),
                    "not_timed": sum(t.status != "timed" for t in mine), "fault": fault,
                    "ceilings": ceilings[d].to_dict() if d in ceilings else None})
    return out


def _raise_for_fault(timings, path) -> None:
    from strata_bench.errors import KernelFault

    faults = [(d, t) for d, t in timings if t.status.startswith(KERNEL_FAULT)]
    if faults:
        device, first = faults[0]
        raise KernelFault(f"bench: kernel fault in {first.case.name} on device {device}; the other devices' "
                          f"timings are kept (details in {path})")


def _raise_for_rejected(timings, devices: list[int] | None = None) -> None:
    """CheckFailed (exit 1) when a timed variant's outputs differ from the checked result or its time
    beats the roofline: its figures are not results. `devices` (one per timing) names the first's device."""
    from strata_bench.errors import CheckFailed
    from strata_bench.timing.verify import IMPOSSIBLE, TIMED_OUTPUT_DIFFERS

    rejected = [i for i, t in enumerate(timings) if t.status.startswith((TIMED_OUTPUT_DIFFERS, IMPOSSIBLE))]
    if rejected:
        first = timings[rejected[0]]
        where = f" on device {devices[rejected[0]]}" if devices is not None else ""
        raise CheckFailed(f"{len(rejected)} timed variant(s) rejected; first: {first.case.name}{where}: "
                          f"{first.status}")


def _writer(results_dir: Path, devices: list[int], names: dict[int, str], cfg):
    from strata_bench.results import provenance
    from strata_bench.results.paths import device_directory
    from strata_bench.results.store import ResultsWriter

    # One file per run, in the first device's folder; provenance has every device's name, clocks and power.
    prov = provenance.collect(devices)
    prov["timing"] = vars(cfg)
    return ResultsWriter(device_directory(results_dir, names[devices[0]]), "bench", prov)
