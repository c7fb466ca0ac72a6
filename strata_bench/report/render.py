"""`report FILE`: any stored results file as a terminal table, markdown, CSV or JSON.

A/B files are re-judged from their run records (strata_bench.ab.store.outcomes_from_records), so a
report always agrees with the data it is rendered from.
"""
from __future__ import annotations

from pathlib import Path

from strata_bench.errors import InputError
from strata_bench.report.ab import render_ab
from strata_bench.report.frame import count_line, frame_text, print_frame
from strata_bench.results.views import VIEWS, frame
from strata_bench.results.load import load


def render_file(path: str | Path, fmt: str, console=None) -> str | None:
    """Render any results file; returns text for md/csv/json, prints the table format itself."""
    loaded = load(path)
    if loaded.kind == "ab" and fmt in ("table", "md", "json"):
        from strata_bench.ab.store import outcomes_from_records

        outcomes = outcomes_from_records(loaded.records)
        if not outcomes:
            raise InputError(f"{loaded.path} holds no A/B runs")
        return render_ab(outcomes, fmt, console)
    df = frame(loaded, all_columns=fmt in ("csv", "json") and loaded.kind not in VIEWS)
    if df.empty:
        raise InputError(f"{loaded.path} holds no records to show")
    inner = (loaded.summary or {}).get("summary") or {}
    notes = [f"note: {n}" for n in (inner.get("notes") or () if isinstance(inner, dict) else ()) if isinstance(n, str)]
    if fmt == "table":
        print_frame(df, f"{loaded.kind}: {loaded.path.name}", console)
        for line in (*notes, count_line(df)):
            (console.print if console is not None else print)(line)
        return None
    text = frame_text(df, fmt)
    return text if fmt in ("csv", "json") else "\n\n".join([text.rstrip("\n"), *notes, count_line(df)])
