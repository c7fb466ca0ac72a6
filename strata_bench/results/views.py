"""Each record kind's view of its records, and the records as a table: flattened with pandas (nested
keys joined with "."), the columns the kind's view picks (every scalar column for a kind without one).
`report` renders these tables and `compare` reads its figures through the same views."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from strata_bench.results.load import Loaded

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
