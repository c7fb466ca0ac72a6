"""`strata-bench plot FILE`: a PNG of A/B runs in run order."""
from __future__ import annotations

import click

from strata_bench.files import UserPath


@click.command("plot")
@click.argument("path", metavar="FILE", type=UserPath(dir_okay=False))
@click.option("-o", "--out", "out", type=UserPath(dir_okay=False), default=None,
              help="PNG to write (default: FILE with .png beside it).")
def command(path, out):
    """Plot an A/B results file: each arm's values by run index, failures and warm-ups marked, and
    the paired differences B - A by pair, so drift and outliers show at a glance. Needs matplotlib.

    \b
    Example:
        strata-bench plot results/nvidia-h200/ab-20250101T120000Z.json -o ab.png
    """
    from strata_bench.report.plot import plot_file

    written = plot_file(path, out)
    click.echo(f"wrote {written}")
