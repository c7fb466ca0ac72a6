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


# The terminal's names for the views' columns (results/views.py; CSV and JSON keep the record's own).
SHORT_NAMES = {"median_us": "median us", "min_us": "min us", "max_us": "max us", "ci_rel": "CI rel",
               "gbps": "GB/s", "frac_bound": "of bound", "tflops": "TFLOP/s", "ncols": "n", "worst_ratio": "worst",
               "seconds": "s", "run_index": "run", "position": "pos", "exit_code": "exit", "wall_s": "wall s"}
# Dropped first, in this order, where the table is wider than the terminal (-o csv keeps every column).
LEAST_NEEDED = ("copies", "trials", "tflops", "max_us", "min_us", "bound", "ci_rel", "seconds", "device",
                "wall_s", "exit_code", "position", "run_index", "warmup")
CELL_LIMIT = 60  # a longer cell (a rejected row's reason) is cut here; the record keeps it whole
TABLE_DIGITS = 4  # significant digits of a number in the terminal table


def print_frame(df, title: str, console=None) -> None:
    """The DataFrame as a rich table that fits the console: short column names, numbers to TABLE_DIGITS,
    long cells cut, and the least needed columns left out (said in the caption) where it is too wide."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    cells = {col: [_table_cell(v) for v in df[col]] for col in df.columns}
    shown = _fitting(cells, console.width)
    dropped = [c for c in df.columns if c not in shown]
    caption = f"left out at {console.width} columns: {', '.join(map(str, dropped))} (-o csv has every column)"
    table = Table(title=title, caption=caption if dropped else None)
    for col in shown:
        table.add_column(SHORT_NAMES.get(str(col), str(col)), overflow="fold")
    for i in range(len(df)):
        table.add_row(*[cells[col][i] for col in shown])
    console.print(table)


def _table_cell(value: Any) -> str:
    if isinstance(value, float) and not math.isnan(value):
        text = f"{value:.{TABLE_DIGITS}g}"
    else:
        text = _fmt_cell(value)
    return text if len(text) <= CELL_LIMIT else text[:CELL_LIMIT - 3] + "..."


def _fitting(cells: dict[Any, list[str]], width: int) -> list[Any]:
    """The columns kept: all of them, less LEAST_NEEDED's in order until the table fits `width`."""
    def needed(cols: list[Any]) -> int:  # each column's widest cell or header, plus rich's 3-character borders
        return 1 + sum(3 + max([len(SHORT_NAMES.get(str(c), str(c)))] + [len(v) for v in cells[c]]) for c in cols)

    shown = list(cells)
    for name in LEAST_NEEDED:
        if needed(shown) <= width:
            break
        shown = [c for c in shown if c != name]
    return shown


def count_line(df) -> str:
    """'449 rows: 449 PASS' (or the statuses' first words: timed, impossible...), for the end of a report."""
    head = f"{len(df)} row{'s' if len(df) != 1 else ''}"
    if "status" not in df.columns:
        return head
    kinds = df["status"].map(lambda s: str(s).split(":", 1)[0]).value_counts()
    return f"{head}: " + ", ".join(f"{n} {k}" for k, n in kinds.items())
