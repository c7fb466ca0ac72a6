"""A table of records (results/views.py makes it) as markdown, CSV, JSON or rich."""
from __future__ import annotations

import math
from typing import Any, Sequence


# ---------------------------------------------------------------- generic rendering

def frame_text(df, fmt: str) -> str:
    """A DataFrame as markdown, CSV or JSON text."""
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "json":
        return df.to_json(orient="records", indent=2)
    headers = [str(c) for c in df.columns]
    rows = [[_fmt_cell(v) for v in row] for row in df.itertuples(index=False)]
    return markdown_table(headers, rows)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A pipe table; pipes in cells are escaped and newlines become spaces."""
    def esc(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _fmt_cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def print_frame(df, title: str, console=None) -> None:
    """The DataFrame as a rich table with a title."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=title)
    for col in df.columns:
        table.add_column(str(col), overflow="fold")
    for row in df.itertuples(index=False):
        table.add_row(*[_fmt_cell(v) for v in row])
    console.print(table)
