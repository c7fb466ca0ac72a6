"""Compare two results files of one kind, case by case (the logic; strata_bench.report.compare renders it).

Records are matched by their kind's key (case, and variant for bench, arm for ab). Cases with several
samples get Welch's t interval of NEW vs OLD, single values the bare ratio; parity files compare status,
and a case that passed in OLD and does not pass in NEW is a regression.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from strata_bench.errors import InputError
from strata_bench.report.frame import VIEWS, View, frame
from strata_bench.report.load import Loaded, load
from strata_bench.stats.criteria import Criteria
from strata_bench.stats.verdict import SampleComparison, compare_samples


@dataclass(frozen=True)
class CaseDelta:
    """One case matched across OLD and NEW: its values (or parity status) on each side and the verdict."""

    key: tuple[str, ...]
    old: tuple[float, ...] | str  # every finite value, or the parity status
    new: tuple[float, ...] | str
    result: SampleComparison | None
    status_change: str = ""  # parity: "PASS -> FAIL"
    regression: bool = False

    @property
    def name(self) -> str:
        return " / ".join(self.key)


@dataclass(frozen=True)
class FileComparison:
    """Every matched case of two files, and the cases found in only one of them."""

    kind: str
    value_column: str
    deltas: tuple[CaseDelta, ...]
    only_old: tuple[str, ...]
    only_new: tuple[str, ...]
    unit: str = ""  # of the compared values, where the file records it (ab plans)

    @property
    def regressions(self) -> list[CaseDelta]:
        return [d for d in self.deltas if d.regression]


def compare_files(old_path: str | Path, new_path: str | Path, criteria: Criteria,
                  higher_is_better: bool | None = None) -> FileComparison:
    """Match records by case key; NEW/OLD ratio and verdict per case (or a status change for parity)."""
    old, new = load(old_path), load(new_path)
    if old.kind != new.kind:
        raise InputError(f"cannot compare a {old.kind!r} file with a {new.kind!r} file")
    view = VIEWS.get(old.kind, View((), ("case",), ("value",)))
    old_df = _without_rejected(old, frame(old, all_columns=True))
    new_df = _without_rejected(new, frame(new, all_columns=True))
    key = [k for k in view.key if k in old_df.columns and k in new_df.columns]
    if not key:
        raise InputError(f"{old.path.name}: records have no {'/'.join(view.key)} column to match cases by")
    if old.kind == "parity":
        return _compare_status(old_df, new_df, key)
    if old.kind == "ab" and (_has_metrics(old) or _has_metrics(new)):
        return _compare_ab_metrics(old, new, criteria, higher_is_better)
    column = next((v for v in view.values if v in old_df.columns and v in new_df.columns), None)
    if column is None:
        raise InputError(f"{old.kind} records carry none of {', '.join(view.values) or 'value'}: nothing to compare")
    if higher_is_better is None:
        higher_is_better = _file_direction(old) if old.kind == "ab" else view.higher_is_better
    crit = Criteria(higher_is_better, criteria.same_band, criteria.fail_on_regression, criteria.confidence)
    unit = _file_unit(old) if old.kind == "ab" else ""
    return _compare_values(old.kind, column, _samples(old_df, key, column), _samples(new_df, key, column), crit,
                           unit)


def _without_rejected(loaded: Loaded, df):
    """Records whose timings were rejected (timed output differs, impossible time: timing/verify.py) are
    not results: bench variants by their status, ab cases by their "rejected" record. They then show as
    only in one file."""
    from strata_bench.timing.verify import IMPOSSIBLE, TIMED_OUTPUT_DIFFERS

    if "status" in df.columns:
        df = df[~df["status"].astype(str).str.startswith((TIMED_OUTPUT_DIFFERS, IMPOSSIBLE))]
    rejected = {r.get("case") for r in loaded.records if r.get("record") == "rejected"}
    if rejected and "case" in df.columns:
        df = df[~df["case"].isin(rejected)]
    return df


def _has_metrics(loaded: Loaded) -> bool:
    return any(r.get("record") == "run" and r.get("metrics") for r in loaded.records)


def _metric_samples(loaded: Loaded) -> dict[tuple[str, ...], list[float]]:
    """(case, arm, metric) -> every measured value of that metric (warm-ups and failures left out)."""
    out: dict[tuple[str, ...], list[float]] = {}
    for r in loaded.records:
        if r.get("record") != "run" or r.get("warmup") or r.get("failure"):
            continue
        for name in r.get("metric_order") or sorted(r.get("metrics") or {}):
            value = (r.get("metrics") or {}).get(name)
            if isinstance(value, (int, float)) and math.isfinite(value):
                out.setdefault((str(r.get("case", "")), str(r["arm"]), name), []).append(float(value))
    return out


def _compare_ab_metrics(old: Loaded, new: Loaded, criteria: Criteria, higher_is_better: bool | None) -> FileComparison:
    """A/B files with several metrics: a row per case, arm and metric, each with its own direction."""
    directions = {str(n): bool(h) for n, h in _plan_record(old).get("directions", [])}
    default = _file_direction(old) if higher_is_better is None else higher_is_better
    old_s, new_s = _metric_samples(old), _metric_samples(new)
    deltas = []
    for key in [k for k in old_s if k in new_s]:
        up = directions.get(key[2].split("[", 1)[0], default) if higher_is_better is None else higher_is_better
        crit = Criteria(up, criteria.same_band, criteria.fail_on_regression, criteria.confidence)
        result = compare_samples(old_s[key], new_s[key], crit)
        deltas.append(CaseDelta(key, tuple(old_s[key]), tuple(new_s[key]), result, regression=result.regression))
    return FileComparison("ab", "metrics", tuple(deltas), _names(old_s, new_s), _names(new_s, old_s),
                          _file_unit(old))


def _plan_record(loaded: Loaded) -> Mapping[str, Any]:
    return next((r for r in loaded.records if r.get("record") == "plan"), {})


def _file_direction(loaded: Loaded) -> bool:
    return bool(dict(_plan_record(loaded).get("criteria", {})).get("higher_is_better", False))


def _file_unit(loaded: Loaded) -> str:
    return str(_plan_record(loaded).get("unit", ""))


def _samples(df, key: list[str], column: str) -> dict[tuple[str, ...], list[float]]:
    """Every finite value per case key; warm-up runs (ab) are left out."""
    if "warmup" in df.columns:
        df = df[~df["warmup"].fillna(False).astype(bool)]
    out: dict[tuple[str, ...], list[float]] = {}
    for row in df.to_dict("records"):
        value = row.get(column)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out.setdefault(tuple(str(row[k]) for k in key), []).append(float(value))
    return out


def _compare_values(kind: str, column: str, old: dict, new: dict, crit: Criteria,
                    unit: str = "") -> FileComparison:
    deltas = []
    for key in [k for k in old if k in new]:
        result = compare_samples(old[key], new[key], crit)
        deltas.append(CaseDelta(key, tuple(old[key]), tuple(new[key]), result, regression=result.regression))
    return FileComparison(kind, column, tuple(deltas), _names(old, new), _names(new, old), unit)


def _names(a: dict, b: dict) -> tuple[str, ...]:
    return tuple(" / ".join(k) for k in a if k not in b)


def _compare_status(old_df, new_df, key: list[str]) -> FileComparison:
    """Parity: a case that passed in OLD and does not pass in NEW is a regression."""
    def statuses(df):
        return {tuple(str(r[k]) for k in key): str(r.get("status", "")) for r in df.to_dict("records")}

    old, new = statuses(old_df), statuses(new_df)
    deltas = []
    for k in [k for k in old if k in new]:
        change = f"{old[k]} -> {new[k]}" if old[k] != new[k] else old[k]
        deltas.append(CaseDelta(k, old[k], new[k], None, change, old[k] == "PASS" and new[k] != "PASS"))
    return FileComparison("parity", "status", tuple(deltas), _names(old, new), _names(new, old))
