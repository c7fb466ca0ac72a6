"""`strata-bench compare OLD NEW`: per-case ratio and verdict between two results files."""
from __future__ import annotations

import click

from strata_bench.cli.options import output_option

from strata_bench.errors import CheckFailed


@click.command("compare")
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@click.option("--fail-on-regression", "fail_pct", type=click.FloatRange(min=0), default=None, metavar="PCT",
              help="Exit 1 when a case is worse by more than PCT percent (beyond the 95% CI when there "
                   "are several samples; a PASS -> FAIL for parity).")
@click.option("--same-band", "band_pct", type=click.FloatRange(min=0), default=1.0, show_default=True,
              metavar="PCT", help="Verdict SAME when NEW vs OLD lies within +/-PCT percent.")
@click.option("--higher-is-better/--lower-is-better", "higher_is_better", default=None,
              help="Direction of the compared figure (default: from the file kind; ab files record it).")
@output_option(("table", "md", "csv", "json"), "Terminal table, markdown, CSV or JSON.", format_alias=True)
def command(old, new, fail_pct, band_pct, higher_is_better, output):
    """Compare two results files of one kind, case by case: NEW/OLD ratio, 95% CI and verdict.

    Records are matched by case name (and variant for bench, arm for ab). Cases with several
    samples get Welch's t interval; single values get the bare ratio. Parity files compare
    status. Cases present in only one file are listed.

    Exit codes: 0 done, 1 a regression beyond --fail-on-regression, 2 bad input.

    \b
    Example:
        strata-bench compare results/h200/bench-OLD.json results/h200/bench-NEW.json --fail-on-regression 2
    """
    from strata_bench.report.compare import render_compare
    from strata_bench.results.compare import compare_files
    from strata_bench.stats.criteria import Criteria

    criteria = Criteria(same_band=band_pct / 100, fail_on_regression=None if fail_pct is None else fail_pct / 100)
    result = compare_files(old, new, criteria, higher_is_better)
    text = render_compare(result, output)
    if text is not None:
        click.echo(text, nl=not text.endswith("\n"))
    if result.regressions:
        names = ", ".join(d.name for d in result.regressions)
        raise CheckFailed(f"compare: {len(result.regressions)} case(s) regressed: {names}")
