"""`compare OLD NEW` as text: a row per matched case (values, NEW/OLD, 95% CI, p, BH q, verdict, reason),
then the summary (counts per verdict, geometric mean, how cases were judged, conditions) and the cases
found in only one file; as a rich table, markdown, CSV or JSON."""
from __future__ import annotations

import json
import math

from strata_bench.stats.format import format_value
from strata_bench.report.frame import markdown_table
from strata_bench.results.compare import CaseDelta, FileComparison
from strata_bench.stats.verdict import signed_percent, unsigned_percent

COMPARE_HEADERS = ["case", "old", "new", "NEW/OLD", "NEW vs OLD 95% CI", "p", "q (BH)", "verdict", "reason"]


def shown(values: tuple[float, ...] | str, unit: str = "") -> str:
    """A side of a case as shown: a parity status as is; values as their mean, in the file's unit
    where known, with n when there are several samples."""
    if isinstance(values, str):
        return values
    mean = sum(values) / len(values)
    text = format_value(mean, unit) if unit else f"{mean:.6g}"
    return text + (f" (n={len(values)})" if len(values) > 1 else "")


def _probability(value: float | None) -> str:
    return "" if value is None else f"{value:.2g}"


def _interval(rel_ci) -> str:
    """A relative interval to 0.01%: timing intervals are often a few tenths of a percent wide."""
    return "n/a" if rel_ci is None else f"[{signed_percent(rel_ci.low, 2)}, {signed_percent(rel_ci.high, 2)}]"


def compare_rows(result: FileComparison) -> list[list[str]]:
    """One row of COMPARE_HEADERS per matched case."""
    return [_row(d, result.unit) for d in result.deltas]


def _row(d: CaseDelta, unit: str) -> list[str]:
    old, new = shown(d.old, unit), shown(d.new, unit)
    if d.result is None:
        return [d.name, old, new, "", "", "", "", d.verdict, d.status_change]
    r = d.result
    reason = r.reason + (f"; {r.regression_reason}" if r.regression_reason else "")
    ratio = f"{r.ratio:.4f}" if math.isfinite(r.ratio) else "n/a"
    return [d.name, old, new, ratio, _interval(r.rel_ci), _probability(r.estimate.p),
            _probability(r.q), d.verdict + (" (REGRESSION)" if d.regression else ""), reason]


def summary_lines(result: FileComparison) -> list[str]:
    """Counts per verdict, the geometric mean, how the cases were judged, the conditions, and the
    cases found in only one file."""
    counts = ", ".join(f"{n} {v}" for v, n in result.counts.items())
    lines = [f"{_cases(len(result.deltas))}: {counts}"]
    if result.kind != "parity":
        lines += [_geomean_line(result), _method_line(result)]
    if result.differences:
        lines.append("compared despite different conditions (--allow-different): "
                     + "; ".join(str(d) for d in result.differences))
    if result.unchecked:
        lines.append("conditions not checked: " + ", ".join(result.unchecked))
    lines += [f"only in OLD: {n}" for n in result.only_old] + [f"only in NEW: {n}" for n in result.only_new]
    return lines


def _cases(n: int) -> str:
    return f"{n} case" if n == 1 else f"{n} cases"


def _geomean_line(result: FileComparison) -> str:
    g = result.geomean
    if g is None:
        return result.geomean_note or "no geometric mean: no positive ratio"
    text = f"geometric mean of NEW/OLD over {_cases(g.n)}: {g.value:.4f}"
    if g.ci is not None:
        text += (f", {result.criteria.confidence:.0%} CI [{g.ci.low:.4f}, {g.ci.high:.4f}]"
                 " (t over the cases' log ratios: their spread, not one case's noise)")
    return text


def _method_line(result: FileComparison) -> str:
    crit, tested = result.criteria, result.n_tested
    text = (f"threshold +/-{unsigned_percent(crit.same_band)}; Benjamini-Hochberg over {_cases(tested)} "
            f"at a {signed_percent(1 - crit.confidence, 0)} false discovery rate")
    single = len(result.deltas) - tested
    if single:
        text += f"; {single} with a single value a side, judged by the bare ratio, outside that step"
    return text


def _json(result: FileComparison, rows: list[list[str]]) -> str:
    cases = []
    for d, row in zip(result.deltas, rows):
        case = dict(zip(COMPARE_HEADERS, row))
        if d.result is not None:
            est = d.result.estimate
            case.update(ratio=est.ratio, ci=None if est.ci is None else [est.ci.low, est.ci.high],
                        ci_method=None if est.ci is None else est.ci.method, p_value=est.p, q_value=d.result.q,
                        n_old=est.n_old, n_new=est.n_new)
        cases.append(case)
    g = result.geomean
    return json.dumps({
        "kind": result.kind, "value": result.value_column, "cases": cases,
        "counts": result.counts,
        "geometric_mean": None if g is None else {"value": g.value, "n": g.n,
                                                   "ci": None if g.ci is None else [g.ci.low, g.ci.high]},
        "threshold": result.criteria.same_band, "false_discovery_rate": round(1 - result.criteria.confidence, 12),
        "differences": [{"what": d.what, "old": d.old, "new": d.new} for d in result.differences],
        "unchecked": list(result.unchecked),
        "only_old": list(result.only_old), "only_new": list(result.only_new),
        "regressions": [d.name for d in result.regressions]}, indent=2)


def render_compare(result: FileComparison, fmt: str, console=None) -> str | None:
    """Text for md, csv and json (the caller echoes it); the table format prints directly (returns None)."""
    rows = compare_rows(result)
    if fmt == "json":
        return _json(result, rows)
    if fmt == "csv":
        import pandas as pd

        return pd.DataFrame(rows, columns=COMPARE_HEADERS).to_csv(index=False)
    lines = summary_lines(result)
    if fmt == "md":
        return markdown_table(COMPARE_HEADERS, rows) + "\n\n" + "\n".join(f"- {e}" for e in lines) + "\n"
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    # The reasons are long sentences: in the terminal they go below the table, one per case.
    table = Table(title=f"compare {result.kind} ({result.value_column})")
    for head in COMPARE_HEADERS[:-1]:
        table.add_column(head, overflow="fold")
    for row in rows:
        table.add_row(*row[:-1])
    console.print(table)
    for row in rows:
        console.print(f"{row[0]}: {row[-1]}", highlight=False, soft_wrap=True)
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    return None
