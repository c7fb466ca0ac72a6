"""`strata-bench bench`: micro-benchmarks of kernel variants (us/call, GB/s, fraction of the ceilings)."""
from __future__ import annotations

from pathlib import Path

import click

from strata_bench.cli.options import (case_filter_options, case_request_options, device_option, list_option, make_filter,
                                      output_option, quiet_option, results_option, split_output_format)
from strata_bench.errors import NoGpu


@click.command("bench")
@case_filter_options
@case_request_options
@click.option("--hot", is_flag=True, help="Time with warm caches (one input copy) instead of rotating cold copies.")
@click.option("--budget", type=float, default=2.0, show_default=True, help="Seconds of trials per variant at most.")
@click.option("--rel-ci", type=float, default=0.01, show_default=True,
              help="Stop a variant's trials when the 95% CI of the median is within this fraction.")
@device_option()
@output_option()
@results_option()
@list_option
@quiet_option
def command(families, formats, pattern, kernels_dir, cases_file, request, hot, budget, rel_ci,
            device_spec, output, results_dir, list_only, quiet):
    """Time kernel variants: us per call, GB/s, fraction of the measured read and copy ceilings.

    Each case runs its variants once at the timed shape and must agree bitwise before it is timed.
    Every copy's outputs are poisoned before the timed replays and must equal that checked result
    after them; a variant whose outputs differ, or whose time beats bytes / read ceiling, is
    rejected (exit 1), never shown as a speedup.
    Launches are captured in a CUDA graph and timed with events around replays; weights are kept cold
    by rotating through input copies totalling at least 3x the L2 (unless --hot). The table has a row
    per call and a column per column count: old / new and the speedup.

    \b
    Examples:
        strata-bench bench --family mmvq --format iq2_xxs --cols 1,4,8
        strata-bench bench --family mmvq --shape 131072x8192 --cols 1,8 --format md
        strata-bench bench --variants examples/toml_variant/variants.toml --family mmvq --shape 131072x8192 --cols 1,8
        strata-bench bench --gguf model.gguf --tensor 'blk\\.0\\.ffn_down' --rows 0:4096 --family mmvq --cols 1,8
    """
    from strata_bench.runner import loop as engine
    from strata_bench.runner import devices as gpu
    from strata_bench.timing.bench import TimingConfig, bench_case
    from strata_bench.timing.ceilings import measure_ceilings

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
    writer = _writer(Path(results_dir), devices, cfg)
    timings = []

    def per_case(family, case, kernels, device):
        return bench_case(family, case, kernels, device, cfg, measure_ceilings(device))

    def keep(result):
        for timing in result:
            timings.append(timing)
            writer.append(timing.to_record())

    def on_fault(case, device, exc, seconds):
        raise exc

    from strata_bench.report.progress import progress_bar
    with progress_bar("bench", total=len(cases) * len(devices), enabled=not quiet) as advance:
        try:
            engine.run_on_devices(cases, devices, per_case, keep, on_fault, advance)
        finally:
            ceil = {str(d): vars(measure_ceilings(d)) for d in devices}
            path = writer.finish({"timings": len(timings), "ceilings": ceil, "hot": hot},
                                 sum(t.status != "timed" for t in timings))
    from strata_bench.report import bench as benchtable
    click.echo(benchtable.render([t.to_record() for t in timings], output or "table"))
    click.echo(f"{len(cases)} cases timed on {len(devices)} device(s); results: {path}", err=True)
    _raise_for_rejected(timings)


def _raise_for_rejected(timings) -> None:
    """CheckFailed (exit 1) when a timed variant's outputs differ from the checked result or its time
    beats the roofline: its figures are not results."""
    from strata_bench.errors import CheckFailed
    from strata_bench.timing.verify import IMPOSSIBLE, TIMED_OUTPUT_DIFFERS

    rejected = [t for t in timings if t.status.startswith((TIMED_OUTPUT_DIFFERS, IMPOSSIBLE))]
    if rejected:
        raise CheckFailed(f"{len(rejected)} timed variant(s) rejected; first: {rejected[0].case.name}: "
                          f"{rejected[0].status}")


def _writer(results_dir: Path, devices: list[int], cfg):
    from strata_bench.runner import devices as gpu
    from strata_bench.results import provenance
    from strata_bench.results.paths import device_directory
    from strata_bench.results.store import ResultsWriter

    prov = provenance.collect(devices)
    prov["timing"] = vars(cfg)
    return ResultsWriter(device_directory(results_dir, gpu.device_name(devices[0])), "bench", prov)
