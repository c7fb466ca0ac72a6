"""`strata-bench compare OLD NEW`: per-case ratio with its interval, verdict and summary between two
results files measured under the same conditions."""
from __future__ import annotations

import click

from strata_bench.cli.options import FiniteFloat, output_option

from strata_bench.errors import CheckFailed
from strata_bench.files import UserPath


@click.command("compare")
@click.argument("old", type=UserPath(dir_okay=False))
@click.argument("new", type=UserPath(dir_okay=False))
@click.option("--fail-on-regression", "fail_pct", type=FiniteFloat(min=0), default=None, metavar="PCT",
              help="Exit 1 when a case is worse by more than PCT percent (its whole 95% CI beyond PCT and "
                   "the case a discovery after Benjamini-Hochberg; the bare ratio for single values; "
                   "a PASS -> FAIL for parity).")
@click.option("--threshold", "--same-band", "band_pct", type=FiniteFloat(min=0), default=1.0,
              show_default=True, metavar="PCT",
              help="Changes within +/-PCT percent do not count: SAME when the CI lies inside it, FASTER or "
                   "SLOWER only beyond it (--same-band is the older name).")
@click.option("--allow-different", is_flag=True,
              help="Compare files from different devices, drivers, clocks policies or kernel sources "
                   "(refused by default); the differences are printed with the result.")
@click.option("--higher-is-better/--lower-is-better", "higher_is_better", default=None,
              help="Direction of the compared figure (default: from the file kind; ab files record it).")
@output_option(("table", "md", "csv", "json"), "Terminal table, markdown, CSV or JSON.")
def command(old, new, fail_pct, band_pct, higher_is_better, allow_different, output):
    """Compare two results files of one kind, case by case: NEW/OLD, its 95% CI, p, BH q and verdict.

    The files must share device, driver, clocks policy (max clocks, power limit) and kernel sources,
    else the comparison is refused (exit 2) unless --allow-different. Sources are the recorded source
    closures of the families both files measured (an edit to another family's kernel is no difference),
    or the kernels_src hash where a file records no closures. Records are matched by
    case name (and variant for bench, arm for ab). Each case's NEW/OLD is the ratio of geometric
    means of its samples (a bench record's samples_us, an ab file's runs) with Welch's t interval
    on log values; the p-values are adjusted by Benjamini-Hochberg across cases (q, at a 5% false
    discovery rate). Single values get the bare ratio, labelled so. Below the table: counts of
    FASTER, SLOWER, SAME and UNDECIDED, and the geometric mean of the ratios with its CI. Parity
    files compare status. Cases present in only one file are listed.

    Exit codes: 0 done, 1 a regression beyond --fail-on-regression, 2 bad input or different conditions.

    \b
    Example:
        strata-bench compare results/nvidia-h200/bench-OLD.json results/nvidia-h200/bench-NEW.json \\
            --fail-on-regression 2 --threshold 1 -o md
    """
    from strata_bench.report.compare import render_compare
    from strata_bench.results.compare import compare_files
    from strata_bench.stats.criteria import Criteria

    criteria = Criteria(same_band=band_pct / 100, fail_on_regression=None if fail_pct is None else fail_pct / 100)
    result = compare_files(old, new, criteria, higher_is_better, allow_different)
    text = render_compare(result, output)
    if text is not None:
        click.echo(text, nl=not text.endswith("\n"))
    if result.regressions:
        names = ", ".join(d.name for d in result.regressions)
        raise CheckFailed(f"compare: {len(result.regressions)} case(s) regressed: {names}")
