"""`strata-bench results`: list stored results and verify that they describe the current kernel sources."""
from __future__ import annotations

import json
from pathlib import Path

import click

from strata_bench.cli.options import output_option
from strata_bench.files import UserPath

DEFAULT_DIR = "results"


@click.group("results")
def command() -> None:
    """Stored results: list them, or check that they are current.

    \b
    Example:
        strata-bench results list
        strata-bench results verify results/
    """


@command.command("verify")
@click.argument("directory", required=False, default=DEFAULT_DIR, type=UserPath(file_okay=False))
@output_option(("table", "json"), "How to print the result.")
def verify(directory: str, output: str) -> None:
    """Check that stored results are current (exit 1 if any is not).

    Every results summary under DIRECTORY is checked. A summary is current when the sources its
    families compiled are unchanged, it records no failures, and its records (.jsonl) file is present.
    Each family's recorded source closure (every file its compiles read) is scanned again; a changed
    one is named with its files ("mmvq: kernels_src/mmvq/mmvq.cu changed"), and an edit no recorded
    family reads leaves the summary current. A summary that records no closures (written before they
    were recorded, or a command A/B) is current while the kernels_src hash (every file) is unchanged.
    DIRECTORY defaults to results/.

    \b
    Example:
        strata-bench results verify
        strata-bench results verify results/nvidia-h200 -o json
    """
    from strata_bench.results import verify as resultcheck
    from strata_bench.errors import CheckFailed

    current, verdicts = resultcheck.verify(Path(directory))
    if output == "json":
        click.echo(json.dumps(_verdicts_json(current, verdicts), indent=2))
    else:
        _print_verdicts(current, verdicts)
    bad = [v for v in verdicts if not v.ok]
    if bad:
        first = bad[0]
        raise CheckFailed(f"results verify: {len(bad)} of {len(verdicts)} summaries not current "
                          f"(first: {first.info.name}: {first.problems[0]})")


def _print_verdicts(current: str, verdicts) -> None:
    from strata_bench.cli.console import stdout_console
    from rich.table import Table

    table = Table(title=f"Results vs kernels_src {current[:12]}")
    for name in ("file", "kind", "sources ok", "failures", "verdict"):
        table.add_column(name, overflow="fold")
    for v in verdicts:
        hash_ok = "-" if v.hash_ok is None else ("yes" if v.hash_ok else "[red]no[/red]")
        verdict = "[green]current[/green]" if v.ok else "[red]" + "; ".join(v.problems) + "[/red]"
        failures = "-" if v.info.failures is None else str(v.info.failures)
        table.add_row(v.info.name, v.info.kind or "-", hash_ok, failures, verdict)
    console = stdout_console()
    console.print(table)
    ok = sum(v.ok for v in verdicts)
    console.print(f"{len(verdicts)} summaries: {ok} current, {len(verdicts) - ok} not current")


def _verdicts_json(current: str, verdicts) -> dict:
    return {"kernels_src_hash": current,
            "summaries": [{"file": v.info.name, "kind": v.info.kind, "kernels_src_hash": v.info.src_hash,
                           "judged_by": "kernels_src_hash" if v.info.sources is None else "sources",
                           "hash_ok": v.hash_ok, "stale_sources": {key: list(found) for key, found in v.stale},
                           "failures": v.info.failures, "ok": v.ok, "problems": list(v.problems)}
                          for v in verdicts]}


@command.command("list")
@click.argument("directory", required=False, default=DEFAULT_DIR, type=UserPath(file_okay=False))
def list_results(directory: str) -> None:
    """List stored results summaries.

    Shows each summary under DIRECTORY (default results/) with its kind, time, device, record count,
    failures and whether its sources are current: the families whose closures it recorded, or its
    kernels_src hash where it records none.

    \b
    Example:
        strata-bench results list results/
    """
    from strata_bench.cli.console import stdout_console
    from rich.table import Table

    from strata_bench.results import verify as resultcheck
    from strata_bench.kernels.sources import kernels_src_hash

    infos = resultcheck.find_summaries(Path(directory))
    current = kernels_src_hash()
    table = Table(title=f"Results under {directory}")
    for name in ("file", "kind", "created", "device", "records", "failures", "sources"):
        table.add_column(name, overflow="fold")
    for info in infos:
        table.add_row(info.name, info.kind or "-", info.created or "-", info.device or "-",
                      _text(info.records_count()), _text(info.failures), _hash_text(info, current))
    console = stdout_console()
    console.print(table)
    console.print(f"{len(infos)} summaries")


def _text(value) -> str:
    return "-" if value is None else str(value)


def _hash_text(info, current: str) -> str:
    from strata_bench.results.verify import stale_sources

    if info.unreadable:
        return f"({info.unreadable})"
    if info.sources is not None:
        stale = [key for key, _ in stale_sources(info)]
        families = ", ".join(key for key, _ in info.sources) or "no family"
        return families + (f" (changed: {', '.join(stale)})" if stale else " (current)")
    if info.src_hash is None:
        return "-"
    return info.src_hash[:12] + (" (current)" if info.src_hash == current else " (old)")
