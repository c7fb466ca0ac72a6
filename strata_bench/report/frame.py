"""Records as a table: flattened with pandas (nested keys joined with "."), the columns each kind's
view picks (every scalar column for a kind without one), and that table as markdown, CSV, JSON or rich."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from strata_bench.report.load import Loaded

# Text columns too long for a table (kept in CSV/JSON).
LONG_TEXT = ("output_tail", "checks", "stdout", "stderr")


@dataclass(frozen=True)
class View:
    """How to show one kind of results."""

    columns: tuple[str, ...]  # preferred columns, in order; those present are shown
    key: tuple[str, ...] = ("case",)  # identifies a case across two files (compare)
    values: tuple[str, ...] = ()  # the first present is the figure compare reads
    higher_is_better: bool = False
    record_filter: Mapping[str, Any] = field(default_factory=dict)  # e.g. only record == "run"


VIEWS: dict[str, View] = {
    "parity": View(("case", "status", "worst_ratio", "device", "seconds", "error"),
                   key=("case",), values=()),
    "bench": View(("case", "variant", "ncols", "median_us", "min_us", "max_us", "ci_rel", "gbps",
                   "bound", "frac_bound", "tflops", "trials", "copies", "status"),
                  key=("case", "variant"), values=("median_us", "us_per_call", "us", "time_us", "value")),
    "ab": View(("case", "run_index", "pair", "position", "arm", "warmup", "value", "failure", "exit_code",
                "wall_s"), key=("case", "arm"), values=("value",), record_filter={"record": "run"}),
}


def frame(loaded: Loaded, all_columns: bool = False):
    """The records as a pandas DataFrame, with the kind's columns (or every scalar column)."""
    import pandas as pd

    view = VIEWS.get(loaded.kind)
    records = [r for r in loaded.records if _matches(r, view.record_filter if view else {})]
    if not records:
        return pd.DataFrame()
    df = pd.json_normalize(records, sep=".")
    df = df.apply(lambda col: col.map(_cell))
    if all_columns:
        return df
    chosen = [c for c in (view.columns if view else ()) if c in df.columns]
    if len(chosen) >= 2:
        return df[chosen]
    return df[[c for c in df.columns if not c.startswith(LONG_TEXT) and c != "record"]]


def _matches(record: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(record.get(k) == v for k, v in wanted.items())


def _cell(value: Any) -> Any:
    """Lists become short text so every column is scalar."""
    if isinstance(value, (list, tuple)):
        text = ", ".join(str(v) for v in value)
        return text if len(text) <= 80 else text[:77] + "..."
    return value


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
