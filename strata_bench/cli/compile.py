"""`strata-bench compile`: build every family's kernel sources for named architectures, no GPU needed."""
from __future__ import annotations

import os
from typing import Sequence

import click

from strata_bench.cli.options import SAID, extension_options, family_format_options, make_filter


@click.command("compile")
@click.option("--arch", "archs", multiple=True, type=SAID, metavar="SM[,SM]",
              help="Architectures, e.g. 75,80,86,89,90,120 (default: the local GPU's).")
@family_format_options
@click.option("--resources", is_flag=True, help="Also print registers, spills, shared memory and stack per kernel.")
@click.option("--no-cache", is_flag=True, help="Compile again even where the cubin cache has the result.")
@extension_options
@click.option("-j", "--jobs", "workers", type=click.IntRange(1, 64), default=None,
              help="Parallel NVRTC compiles (default: CPU count).")
def command(archs: Sequence[str], families: Sequence[str], formats: Sequence[str], resources: bool, no_cache: bool,
            extensions: tuple, workers: int | None) -> None:
    """Compile kernel sources through NVRTC with the options results record.

    Without --arch it builds for the local GPU (exit 77 if there is none); with --arch it needs no GPU,
    only NVRTC. Cubins are cached under $STRATA_CACHE_DIR (default ~/.cache/strata-bench/cubin), keyed
    by every file the compile reads (the source and each header its includes reach, -I folders a family
    or variant adds included), the options, the NVRTC version and the architecture. A compile
    error prints the NVRTC log (file(line): error ...) and exits 2. An architecture the installed NVRTC
    does not list is refused before anything compiles. A source that needs a CUDA toolkit header this
    host lacks (crt/mma.h for the wmma kernels) is skipped, and the summary says which and why.

    \b
    Example:
        strata-bench compile --arch 75,80,86,89,90,120
        strata-bench compile --arch 90 --family mmvq --resources
        strata-bench compile --arch 90 --kernels my_kernels --cases my_cases.py
        strata-bench compile --variants examples/toml_variant/variants.toml --arch 90 --family mmvq
        strata-bench compile --ggml ~/llama.cpp --arch 90 --family mmvq,dequant,q8_1
        strata-bench compile --ggml ~/llama.cpp --arch 90 --family mmq --format q8_0
    """
    from strata_bench.cli.console import stdout_console

    from strata_bench.kernels import jobs as buildplan
    from strata_bench.gpu.devices import local_archs
    from strata_bench.runs.catalog import build_catalog
    from strata_bench.cases.spec import RunSpec
    from strata_bench.runs.prepare import select_families

    arch_list = buildplan.parse_archs(archs) if archs else None  # bad --arch fails before any import
    # the families are the spec's filter too: an extension speaks only of what the run selects
    spec = RunSpec(filter=make_filter(tuple(families), tuple(formats), None), extensions=extensions)
    spec.check()
    chosen = select_families(build_catalog(spec), spec.filter.families)
    arch_list = arch_list or local_archs()
    jobs = buildplan.plan(chosen, arch_list)
    outcomes = _run_with_progress(jobs, not no_cache, workers or os.cpu_count() or 1)
    console = stdout_console()
    console.print(summary_table(outcomes, arch_list))
    if resources:
        console.print(resources_table(outcomes))
    ok, skipped = sum(o.ok for o in outcomes), [o for o in outcomes if o.skipped]
    failed = sum(o.error is not None for o in outcomes)
    tail = f", {len(skipped)} skipped" if skipped else ""
    console.print(f"{len(outcomes)} compile(s): {ok} ok ({sum(o.cache_hit for o in outcomes)} cached), "
                  f"{failed} failed{tail}")
    for reason in dict.fromkeys(o.skipped for o in skipped):
        console.print(f"skipped: {reason}")
    buildplan.raise_for_failures(outcomes)


def _run_with_progress(jobs, use_cache: bool, workers: int):
    from strata_bench.kernels import jobs as buildplan
    from strata_bench.report.progress import progress_bar

    # The bar goes to stderr and vanishes when done, so stdout holds only the tables.
    with progress_bar("compile", len(jobs)) as advance:
        return buildplan.run_all(jobs, use_cache, workers, on_done=lambda _outcome: advance())


def summary_table(outcomes, archs: Sequence[str]):
    """A row per family source, a column per architecture: ok with seconds, cached, or FAILED."""
    from rich.table import Table

    table = Table(title="Compile")
    table.add_column("source")
    for arch in archs:
        table.add_column(arch, justify="right")
    cells: dict[str, dict[str, str]] = {}
    for o in outcomes:
        cells.setdefault(o.job.label, {})[o.job.arch] = _cell(o)
    for label, by_arch in cells.items():
        table.add_row(label, *(by_arch.get(a, "-") for a in archs))
    return table


def _cell(outcome) -> str:
    if outcome.skipped:
        return "[yellow]skipped[/yellow]"
    if not outcome.ok:
        return "[red]FAILED[/red]"
    if outcome.cache_hit:
        return "cached"
    return f"ok {outcome.seconds:.2f}s"


def resources_table(outcomes):
    """Registers, spill stores/loads, static shared memory and stack per kernel and architecture."""
    from rich.table import Table

    table = Table(title="Kernel resources (ptxas; bytes except registers)")
    table.add_column("kernel", no_wrap=True)
    table.add_column("arch", no_wrap=True)
    for name in ("regs", "spill st", "spill ld", "smem", "stack"):
        table.add_column(name, justify="right", no_wrap=True)
    for o in outcomes:
        for r in o.resources:
            spills = r.spill_stores or r.spill_loads
            style = "yellow" if spills else None
            table.add_row(r.kernel, o.job.arch, str(r.registers), str(r.spill_stores), str(r.spill_loads),
                          str(r.shared_bytes), str(r.stack_bytes), style=style)
    return table
