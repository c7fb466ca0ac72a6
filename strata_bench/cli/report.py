"""`strata-bench report FILE`: render any stored results file."""
from __future__ import annotations

import click

from strata_bench.cli.options import output_option


@click.command("report")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@output_option(("table", "md", "csv", "json"), "Terminal table, markdown, CSV or JSON.", format_alias=True)
def command(path, output):
    """Render a results file (summary .json or records .jsonl) of any kind: parity, bench, ab.

    Columns are picked by the file's kind; a kind without a view shows every scalar column.
    A/B files are re-judged from their run records (same statistics and verdict as `ab`); their
    CSV is one row per run.

    \b
    Examples:
        strata-bench report results/nvidia-h200/ab-20250101T120000Z.json
        strata-bench report results/nvidia-h200/bench-20250101T120000Z.jsonl --format md
        strata-bench report results/nvidia-h200/parity-20250101T120000Z.json --format csv > parity.csv
    """
    from strata_bench.report.render import render_file

    text = render_file(path, output)
    if text is not None:
        click.echo(text, nl=not text.endswith("\n"))
