"""The bench tables: per-variant detail, and the pull-request pivot (a row per call, a column per
column count, `old / new` us and the speedup). Input: bench records (dicts), so stored results render
the same way as a live run."""
from __future__ import annotations

import io
import json
from typing import Any, Iterable

import pandas as pd
from rich.console import Console
from rich.table import Table


def _call_name(rec: dict[str, Any]) -> str:
    params = "".join(f"/{k}={v}" for k, v in sorted((rec.get("params") or {}).items()))
    return f"{rec['family']}/{rec['format']}/{rec['rows']}x{rec['cols']}{params}"


def detail_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for r in records:
        rows.append({"case": r["case"], "variant": r["variant"], "status": r["status"],
                     "median_us": r.get("median_us"), "min_us": r.get("min_us"), "max_us": r.get("max_us"),
                     "ci_%": None if r.get("ci_rel") is None else 100 * r["ci_rel"],
                     "GB/s": r.get("gbps"), "%read": _pct(r.get("frac_read")), "%copy": _pct(r.get("frac_copy")),
                     "TFLOP/s": r.get("tflops")})
    return pd.DataFrame(rows)


def _pct(x):
    return None if x is None else 100 * x


def pivot_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows: calls; columns: n=<ncols>; cells: 'old / new us (speedup)' for the first two variants."""
    by_call: dict[str, dict[int, dict[str, dict]]] = {}
    for r in records:
        by_call.setdefault(_call_name(r), {}).setdefault(int(r["ncols"]), {})[r["variant"]] = r
    table = {}
    for call, per_n in by_call.items():
        table[call] = {f"n={n}": _cell(v) for n, v in sorted(per_n.items())}
    return pd.DataFrame.from_dict(table, orient="index").fillna("")


def _cell(variants: dict[str, dict]) -> str:
    names = list(variants)
    bad = [v for v in variants.values() if v["status"] != "timed"]
    if bad:  # timed but rejected (timed output differs, impossible): never shown as a speedup
        return ("rejected: " if bad[0].get("trials") else "not timed: ") + bad[0]["status"]
    if len(names) < 2:
        v = variants[names[0]]
        return f"{v['median_us']:.2f} us"
    a, b = variants[names[0]], variants[names[1]]
    return (f"{a['median_us']:.2f} / {b['median_us']:.2f} us ({a['median_us'] / b['median_us']:.2f}x, "
            f"{b['gbps']:.0f} GB/s, {100 * (b.get('frac_read') or 0):.0f}% read)")


def render(records: list[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps(records, indent=2, default=str)
    pivot = pivot_frame(records)
    detail = detail_frame(records)
    if output == "md":
        return ("Old / new per call (speedup, new's GB/s and fraction of the read ceiling)\n\n"
                + pivot.to_markdown() + "\n\n" + detail.to_markdown(index=False, floatfmt=".2f"))
    buf = io.StringIO()
    console = Console(file=buf, width=200, force_terminal=False)
    console.print(_rich(pivot, "old / new per call", index=True))
    console.print(_rich(detail, "per variant", index=False))
    return buf.getvalue().rstrip()


def _rich(frame: pd.DataFrame, title: str, index: bool) -> Table:
    table = Table(title=title)
    if index:
        table.add_column("call")
    for col in frame.columns:
        table.add_column(str(col), overflow="fold")
    for idx, row in frame.iterrows():
        cells = [_fmt(v) for v in row.tolist()]
        table.add_row(*([str(idx)] if index else []), *cells)
    return table


def _fmt(v) -> str:
    if isinstance(v, float):
        return "-" if v != v else f"{v:.2f}"
    return "-" if v is None else str(v)
