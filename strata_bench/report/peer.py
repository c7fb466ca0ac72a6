"""The peer table (issue 14): an mmvq bench file against llama.cpp's figures on the same card.

One row per (shape, format, column count) of the bench records: each variant's us and GB/s, the
fastest timed variant ("best", which the default path may pick: old and new are bitwise equal) with
its share of the read ceiling, llama.cpp's us from the peer CSV, llama/best, and the targets (issue 14's
speed-ups, issue 37's shares of the read ceiling) with met/missed.

Peer CSV columns: format, ncols, us (llama.cpp's us per call), and optionally rows, cols. Without
rows/cols the figures are the DRAM shape's, 131072 x 8192 (docs/peer_llamacpp_h200.csv says so in its
source column), and records of other shapes get no peer figure.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from strata_bench.errors import InputError

PEER_DEFAULT_SHAPE = (131072, 8192)
LOW_BIT = ("iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s")
WIDE = ("iq4_nl", "iq4_xs", "q8_0")
BANDWIDTH_BOUND = ("iq4_xs", "q8_0")


def target(fmt: str, ncols: int) -> float | None:
    """The issue-14 speed-up over llama.cpp for a format and column count (None: no target)."""
    if ncols == 1:
        return 2.0 if fmt in LOW_BIT else 1.15 if fmt in WIDE else None
    if ncols == 8 and fmt.startswith("iq"):
        return 2.5
    return None


def read_target(fmt: str, ncols: int) -> float | None:
    """The share of the read ceiling the best variant should reach (issue 37; issue 14 asked 60% of every
    format at n=1): 85% for the formats one column reads at the ceiling's pace, 60% for the rest at n=1, 40%
    for the 1-3-bit formats at n=8 (None: no target)."""
    if ncols == 1:
        return 0.85 if fmt in BANDWIDTH_BOUND else 0.60
    if ncols == 8 and fmt in LOW_BIT:
        return 0.40
    return None


@dataclass(frozen=True)
class PeerRow:
    """One (shape, format, column count): ours per variant, the best, llama.cpp's, the target."""

    shape: tuple[int, int]
    fmt: str
    ncols: int
    variants: tuple[tuple[str, float, float], ...]  # (variant, median us, GB/s), in the file's order
    best: str
    best_frac_read: float
    peer_us: float | None
    target: float | None
    read_target: float | None

    @property
    def best_us(self) -> float:
        return next(us for name, us, _ in self.variants if name == self.best)

    @property
    def ratio(self) -> float | None:
        """llama.cpp's us over ours (best): above 1, ours is faster."""
        return None if self.peer_us is None else self.peer_us / self.best_us

    @property
    def verdict(self) -> str:
        if self.target is None or self.ratio is None:
            return ""
        return "met" if self.ratio >= self.target else "missed"

    @property
    def read_verdict(self) -> str:
        """The best variant's share of the read ceiling against read_target ("" where there is none)."""
        if self.read_target is None:
            return ""
        return "met" if self.best_frac_read >= self.read_target else "missed"


def foreign_variants(provenance: Mapping[str, Any]) -> set[str]:
    """The variants a results file declares as another engine's (each extension's `foreign_variants` in the
    run's provenance): the peer's rows, never this project's."""
    extensions = (provenance.get("run") or {}).get("extensions") or {}
    return {str(v) for record in extensions.values() if isinstance(record, Mapping)
            for v in record.get("foreign_variants") or ()}


def peer_in_records(records: Iterable[Mapping[str, Any]], variant: str) -> dict[tuple[int, int, str, int], float]:
    """(rows, cols, format, ncols) -> us of `variant`'s timed rows in a bench file (a foreign engine's kernel
    timed beside old and new in one run); InputError where the file has none."""
    peer = {(int(r["rows"]), int(r["cols"]), r["format"], int(r["ncols"])): round(float(r["median_us"]), 1)
            for r in records if r.get("family") == "mmvq" and r.get("variant") == variant
            and r.get("status") == "timed" and r.get("median_us")}
    if not peer:
        raise InputError(f"--peer {variant}: the file has no timed mmvq rows of variant {variant}")
    return peer


def own_records(records: Iterable[Mapping[str, Any]], foreign: set[str]) -> list[Mapping[str, Any]]:
    """The records of this project's variants (every foreign engine's rows are left out: the peer column)."""
    return [r for r in records if r.get("variant") not in foreign]


def load_peer(path: str | Path) -> dict[tuple[int, int, str, int], float]:
    """(rows, cols, format, ncols) -> llama.cpp us from a peer CSV; InputError naming a bad file or row."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"peer CSV not found: {path}")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return _read_peer(csv.DictReader(fh), path)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not a UTF-8 CSV (byte {exc.start} is {exc.object[exc.start]:#04x})") from None
    except csv.Error as exc:
        raise InputError(f"{path} is not a CSV: {exc}") from None


def _read_peer(reader: csv.DictReader, path: Path) -> dict[tuple[int, int, str, int], float]:
    missing = {"format", "ncols", "us"} - set(reader.fieldnames or ())
    if missing:
        raise InputError(f"{path}: peer CSV needs columns format, ncols, us; missing {', '.join(sorted(missing))}")
    peer = {}
    for line, row in enumerate(reader, start=2):
        try:
            shape = (int(row["rows"]), int(row["cols"])) if row.get("rows") else PEER_DEFAULT_SHAPE
            key = (*shape, row["format"].strip().lower(), int(row["ncols"]))
            us = float(row["us"])
        except (TypeError, ValueError, AttributeError):
            raise InputError(f"{path}:{line}: bad peer row {row}") from None
        if not (us > 0 and math.isfinite(us)):
            raise InputError(f"{path}:{line}: us must be a positive number, got {row['us']!r}")
        peer[key] = us
    return peer


def peer_rows(records: Iterable[Mapping[str, Any]], peer: Mapping[tuple[int, int, str, int], float]) -> list[PeerRow]:
    """The table's rows from mmvq bench records (other families and untimed variants are left out)."""
    groups: dict[tuple[int, int, str, int], list[Mapping[str, Any]]] = {}
    for n, r in enumerate(records, 1):
        if r.get("family") == "mmvq" and r.get("status") == "timed" and r.get("median_us"):
            _check_bench_record(r, n)
            groups.setdefault((int(r["rows"]), int(r["cols"]), r["format"], int(r["ncols"])), []).append(r)
    rows = []
    for (m, k, fmt, n), recs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], kv[0][3])):
        best = min(recs, key=lambda r: r["median_us"])
        rows.append(PeerRow((m, k), fmt, n, tuple((r["variant"], float(r["median_us"]), float(r["gbps"]))
                                                  for r in recs),
                            best["variant"], float(best.get("frac_read") or math.nan), peer.get((m, k, fmt, n)),
                            target(fmt, n), read_target(fmt, n)))
    if not rows:
        raise InputError("no timed mmvq records in the bench file: nothing to set against the peer")
    return rows


_BENCH_FIELDS = (("rows", "an integer"), ("cols", "an integer"), ("ncols", "an integer"), ("format", "a string"),
                 ("variant", "a string"), ("median_us", "a positive number"), ("gbps", "a number"),
                 ("frac_read", "a number or null"))


def _check_bench_record(r: Mapping[str, Any], n: int) -> None:
    """InputError naming the record and field a peer row would read with the wrong type."""
    def ok(key: str, what: str) -> bool:
        v = r.get(key)
        if what == "an integer":
            return isinstance(v, int) and not isinstance(v, bool)
        if what == "a string":
            return isinstance(v, str)
        if what == "a number or null" and v is None:
            return True
        number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        return number and (v > 0 if what == "a positive number" else True)

    bad = next(((key, what) for key, what in _BENCH_FIELDS if not ok(key, what)), None)
    if bad:
        import json

        raise InputError(f"bench record {n}: {bad[0]!r} is {json.dumps(r.get(bad[0]))[:40]}, not {bad[1]}")


def peer_frame(rows: list[PeerRow]):
    """The rows as a DataFrame with fixed rounding (us 0.1, GB/s 1, % 0.1, ratios 0.01)."""
    import pandas as pd

    names = list(dict.fromkeys(name for row in rows for name, _, _ in row.variants))
    table = []
    for row in rows:
        cells: dict[str, Any] = {"shape": f"{row.shape[0]}x{row.shape[1]}", "format": row.fmt, "n": row.ncols}
        mine = {name: (us, gbps) for name, us, gbps in row.variants}
        for name in names:
            us, gbps = mine.get(name, (None, None))
            cells[f"{name} us"] = None if us is None else round(us, 1)
            cells[f"{name} GB/s"] = None if gbps is None else round(gbps)
        cells["best"] = row.best
        cells["best %read"] = round(100 * row.best_frac_read, 1)
        cells["llama.cpp us"] = row.peer_us
        cells["llama/best"] = None if row.ratio is None else round(row.ratio, 2)
        cells["target"] = None if row.target is None else f"{row.target:g}x"
        cells["speed"] = row.verdict
        cells["read target"] = None if row.read_target is None else f"{row.read_target:.0%}"
        cells["read"] = row.read_verdict
        table.append(cells)
    return pd.DataFrame(table)


def render_peer(rows: list[PeerRow], fmt: str) -> str:
    """Markdown (pasteable into the README), CSV, JSON records or a plain-text table."""
    df = peer_frame(rows)
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "json":
        return df.to_json(orient="records", indent=2)
    text = df.astype(object).where(df.notna(), "-")
    if fmt == "md":
        met = sum(r.verdict == "met" for r in rows)
        judged = sum(r.verdict != "" for r in rows)
        read_met = sum(r.read_verdict == "met" for r in rows)
        read_judged = sum(r.read_verdict != "" for r in rows)
        return (text.to_markdown(index=False) + f"\n\nSpeed targets met: {met} of {judged}; read targets met: "
                f"{read_met} of {read_judged}; best = the fastest "
                "timed variant (bitwise equal variants, so the default path may take it); llama/best > 1: ours "
                "is faster.")
    return text.to_string(index=False)
