"""`compare OLD NEW` as text: a row per matched case (values, NEW/OLD, 95% CI, verdict, reason),
then the cases found in only one file; as a rich table, markdown, CSV or JSON."""
from __future__ import annotations

import json

from strata_bench.report.format import format_interval, format_value
from strata_bench.report.frame import markdown_table
from strata_bench.results.compare import CaseDelta, FileComparison

COMPARE_HEADERS = ["case", "old", "new", "NEW/OLD", "NEW vs OLD 95% CI", "verdict", "reason"]


def shown(values: tuple[float, ...] | str, unit: str = "") -> str:
    """A side of a case as shown: a parity status as is; values as their mean, in the file's unit
    where known, with n when there are several samples."""
    if isinstance(values, str):
        return values
    mean = sum(values) / len(values)
    text = format_value(mean, unit) if unit else f"{mean:.6g}"
    return text + (f" (n={len(values)})" if len(values) > 1 else "")


def compare_rows(result: FileComparison) -> list[list[str]]:
    """One row of COMPARE_HEADERS per matched case."""
    return [_row(d, result.unit) for d in result.deltas]


def _row(d: CaseDelta, unit: str) -> list[str]:
    old, new = shown(d.old, unit), shown(d.new, unit)
    if d.result is None:
        verdict = "REGRESSION" if d.regression else ("SAME" if d.old == d.new else "CHANGED")
        return [d.name, old, new, "", "", verdict, d.status_change]
    r = d.result
    reason = r.reason + (f"; {r.regression_reason}" if r.regression_reason else "")
    return [d.name, old, new, f"{r.ratio:.4f}", format_interval(r.rel_ci, percent=True),
            r.verdict.value + (" (REGRESSION)" if d.regression else ""), reason]


def render_compare(result: FileComparison, fmt: str, console=None) -> str | None:
    """Text for md, csv and json (the caller echoes it); the table format prints directly (returns None)."""
    rows = compare_rows(result)
    extra = [f"only in OLD: {n}" for n in result.only_old] + [f"only in NEW: {n}" for n in result.only_new]
    if fmt == "json":
        return json.dumps({"kind": result.kind, "value": result.value_column,
                           "cases": [dict(zip(COMPARE_HEADERS, r)) for r in rows],
                           "only_old": list(result.only_old), "only_new": list(result.only_new),
                           "regressions": [d.name for d in result.regressions]}, indent=2)
    if fmt in ("md", "csv"):
        if fmt == "csv":
            import pandas as pd

            return pd.DataFrame(rows, columns=COMPARE_HEADERS).to_csv(index=False)
        text = markdown_table(COMPARE_HEADERS, rows)
        return text + ("\n\n" + "\n".join(f"- {e}" for e in extra) if extra else "") + "\n"
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
    for line in extra:
        console.print(line, highlight=False)
    return None
