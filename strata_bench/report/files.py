"""Render stored results (any kind) as a terminal table, markdown, CSV or JSON; compare two files.

A results file is a summary `.json` (which names its records `.jsonl`) or the `.jsonl` itself. Records
are flattened with pandas (nested keys joined with "."). Each known kind has a view: the columns worth
showing, the key that identifies a case across files, and the value `compare` reads. A kind without a
view shows every scalar column. A/B files are special: their statistics are recomputed from the run
records (abrun.outcomes_from_records), so a report always agrees with the data it is rendered from.
"""
from __future__ import annotations

import io
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from strata_bench.stats import core as S
from strata_bench.errors import InputError
from strata_bench.results.store import read_records, read_summary

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
                   "frac_read", "frac_copy", "tflops", "trials", "copies", "status"),
                  key=("case", "variant"), values=("median_us", "us_per_call", "us", "time_us", "value")),
    "ab": View(("case", "run_index", "pair", "position", "arm", "warmup", "value", "failure", "exit_code",
                "wall_s"), key=("case", "arm"), values=("value",), record_filter={"record": "run"}),
}


@dataclass(frozen=True)
class Loaded:
    """A results file read back: its kind, the summary (None for a bare .jsonl) and the records."""

    path: Path
    kind: str
    summary: Mapping[str, Any] | None
    records: list[dict[str, Any]]


def load(path: str | Path) -> Loaded:
    path = Path(path)
    if not path.exists():
        raise InputError(f"results file not found: {path}")
    if path.suffix not in (".json", ".jsonl"):
        raise InputError(f"results file must be a .json summary or a .jsonl record file, got {path.name!r}")
    summary = read_summary(path) if path.suffix == ".json" else None
    if summary is not None and not path.with_name(str(summary.get("records_file", ""))).is_file():
        raise InputError(f"{path.name}: its records file {summary.get('records_file')!r} is missing beside it")
    records = read_records(path)
    return Loaded(path, infer_kind(path, summary, records), summary, records)


def infer_kind(path: Path, summary: Mapping[str, Any] | None, records: Sequence[Mapping[str, Any]]) -> str:
    """The summary's kind, else the file name's prefix (<kind>-<UTC stamp>.jsonl), else the records."""
    if summary and summary.get("kind"):
        return str(summary["kind"])
    match = re.match(r"(.+?)-\d{8}T\d{6}Z", path.name)
    if match:
        return match.group(1)
    if any(r.get("record") == "plan" for r in records):
        return "ab"
    return "unknown"


# ---------------------------------------------------------------- flattening

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
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    table = Table(title=title)
    for col in df.columns:
        table.add_column(str(col), overflow="fold")
    for row in df.itertuples(index=False):
        table.add_row(*[_fmt_cell(v) for v in row])
    console.print(table)


# ---------------------------------------------------------------- A/B rendering

def describe_arm(describe: Mapping[str, Any]) -> str:
    """'STRATA_X=1 prog --flag' for a command arm; 'variant=new' style for other arms."""
    env = " ".join(f"{k}={v}" if v is not None else f"-u {k}" for k, v in dict(describe.get("env", {})).items())
    argv = describe.get("argv")
    if argv is not None:
        cmd = argv if isinstance(argv, str) else shlex.join(argv)
        return f"{env} {cmd}".strip()
    return " ".join(f"{k}={v}" for k, v in describe.items() if k != "env") or env


def arm_rows(outcome) -> list[list[str]]:
    """Per arm: label, what it runs, runs, failed, n, mean +/- sd, median, min..max, outliers."""
    unit = outcome.plan.unit
    rows = []
    for label, arm in (("A", outcome.comparison.a), ("B", outcome.comparison.b)):
        runs = [r for r in outcome.runs if r.arm == label]
        failed = sum(not r.ok for r in runs)
        span = (f"{S.format_value(arm.min, unit)} .. {S.format_value(arm.max, unit)}" if arm.n else "n/a")
        rows.append([label, describe_arm(outcome.arms.get(label, {})), str(len(runs)), str(failed), str(arm.n),
                     S.format_mean_sd(arm, unit), S.format_value(arm.median, unit), span,
                     str(len(arm.outliers))])
    return rows


# "runs" counts warm-up runs too; "n" is the measured successful runs the statistics use.
ARM_HEADERS = ["arm", "command", "runs", "failed", "n", "mean +/- sd", "median", "min .. max", "outliers"]


def comparison_rows(outcome) -> list[tuple[str, str]]:
    """The paired result as (what, value) rows, in the order a reviewer reads them."""
    c, unit = outcome.comparison, outcome.plan.unit
    p = c.paired
    rows = [("metric", f"{outcome.plan.metric} ({'higher' if c.criteria.higher_is_better else 'lower'} is better)"),
            ("order", f"{outcome.plan.order}, {outcome.plan.pairs} pairs, {outcome.plan.warmup} warm-up pair(s), "
                      f"seed {outcome.plan.seed}")]
    if p is None:
        rows.append(("B - A (paired)", "n/a: no complete pair"))
    else:
        rows += [("B - A (paired)", f"{S.format_diff(p, unit)}, mean +/- 95% CI half-width, {p.n} pairs"),
                 ("sd of B - A", S.format_value(p.sd_diff, unit) if math.isfinite(p.sd_diff) else "n/a"),
                 ("95% CI (t)", S.format_interval(p.ci_t, unit)),
                 ("95% CI (bootstrap)", S.format_interval(p.ci_boot, unit)),
                 ("B vs A, 95% CI", S.format_interval(p.rel_ci, percent=True)),
                 ("ratio B/A [95% CI]", S.format_ratio(p.ratio, p.ratio_ci)),
                 ("Wilcoxon p", _p_text(p.wilcoxon_p, p.wilcoxon_note))]
    rows += [("dominance", S.describe_dominance(c.dominance, c.criteria.higher_is_better)),
             ("outliers", _outlier_text(outcome)),
             ("drift", ("WARNING: " if c.drift.flagged else "") + c.drift.note),
             ("verdict", f"{c.verdict.value}: {c.reason}")]
    if c.regression_reason:
        rows.append(("regression", ("FAIL: " if c.regression else "") + c.regression_reason))
    return rows


def _p_text(p: float | None, note: str) -> str:
    text = "n/a" if p is None else f"{p:.3g}"
    return f"{text} ({note})" if note else text


def _outlier_text(outcome) -> str:
    parts = [f"{label}: {len(arm.outliers)}" for label, arm in (("A", outcome.comparison.a), ("B", outcome.comparison.b))
             if arm.outliers]
    return (", ".join(parts) + " (modified z > 3.5, kept)") if parts else "none (modified z > 3.5)"


def failure_lines(outcome) -> list[str]:
    """One line per failed run, with its reason and the last line it printed."""
    lines = []
    for r in outcome.failures:
        tail = str(r.details.get("output_tail", "")).strip().splitlines()
        last = f" | {tail[-1][:120]}" if tail else ""
        kind = "warm-up" if r.warmup else f"pair {r.pair}"
        lines.append(f"run {r.run_index} ({r.arm}, {kind}): {r.failure}{last}")
    return lines


def print_ab(outcomes, console=None) -> None:
    """Rich tables: arms, then the paired comparison, failures and notes, for each case."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    for outcome in outcomes:
        arms = Table(title=f"A/B: {outcome.case}")
        for head in ARM_HEADERS:
            arms.add_column(head, overflow="fold")
        for row in arm_rows(outcome):
            arms.add_row(*row)
        console.print(arms)
        result = Table(show_header=False, box=None, padding=(0, 1))
        result.add_column(style="bold")
        result.add_column(overflow="fold")
        for what, value in comparison_rows(outcome):
            result.add_row(what, _styled(what, value, outcome))
        console.print(result)
        for line in failure_lines(outcome):
            console.print(f"[red]failed[/red] {line}", soft_wrap=True, markup=True, highlight=False)
        for note in outcome.notes():
            console.print(f"note: {note}", soft_wrap=True, highlight=False)


_VERDICT_STYLE = {"SAME": "green", "FASTER": "bold green", "SLOWER": "bold red", "UNDECIDED": "yellow"}


def _styled(what: str, value: str, outcome) -> str:
    from rich.markup import escape

    text = escape(value)
    if what == "verdict":
        style = _VERDICT_STYLE[outcome.comparison.verdict.value]
        return f"[{style}]{text}[/{style}]"
    if what == "regression" and outcome.comparison.regression:
        return f"[bold red]{text}[/bold red]"
    return text


def ab_markdown(outcomes) -> str:
    """Markdown for a pull request: an arm table and a result table per case, then failures and notes."""
    parts = []
    for outcome in outcomes:
        parts += [f"**A/B: `{outcome.case}`**", "",
                  markdown_table(ARM_HEADERS, [[f"`{c}`" if i == 1 and c else c for i, c in enumerate(row)]
                                               for row in arm_rows(outcome)]), "",
                  markdown_table(["", "result"], [[f"**{w}**", v] for w, v in comparison_rows(outcome)])]
        extra = [f"- failed: {line}" for line in failure_lines(outcome)] + [f"- note: {n}" for n in outcome.notes()]
        parts += ([""] + extra) if extra else []
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def ab_json(outcomes, extra: Mapping[str, Any] | None = None) -> str:
    body = {"cases": [o.summary() for o in outcomes], **dict(extra or {})}
    return json.dumps(body, indent=2, default=str)


def render_ab(outcomes, fmt: str, console=None, footer: str = "") -> str | None:
    """Text for md/json (the caller echoes it); the table format prints directly (returns None)."""
    if fmt == "md":
        return ab_markdown(outcomes)
    if fmt == "json":
        return ab_json(outcomes)
    print_ab(outcomes, console)
    return None


# ---------------------------------------------------------------- report FILE

def render_file(path: str | Path, fmt: str, console=None) -> str | None:
    """Render any results file; returns text for md/csv/json, prints the table format itself."""
    loaded = load(path)
    if loaded.kind == "ab" and fmt in ("table", "md", "json"):
        from strata_bench.ab.runner import outcomes_from_records

        outcomes = outcomes_from_records(loaded.records)
        if not outcomes:
            raise InputError(f"{loaded.path} holds no A/B runs")
        return render_ab(outcomes, fmt, console)
    df = frame(loaded, all_columns=fmt in ("csv", "json") and loaded.kind not in VIEWS)
    if df.empty:
        raise InputError(f"{loaded.path} holds no records to show")
    if fmt == "table":
        print_frame(df, f"{loaded.kind}: {loaded.path.name}", console)
        return None
    return frame_text(df, fmt)


# ---------------------------------------------------------------- compare OLD NEW

@dataclass(frozen=True)
class CaseDelta:
    """One case matched across OLD and NEW."""

    key: tuple[str, ...]
    old: str  # shown values
    new: str
    result: S.SampleComparison | None
    status_change: str = ""  # parity: "PASS -> FAIL"
    regression: bool = False

    @property
    def name(self) -> str:
        return " / ".join(self.key)


@dataclass(frozen=True)
class Comparison2:
    kind: str
    value_column: str
    deltas: tuple[CaseDelta, ...]
    only_old: tuple[str, ...]
    only_new: tuple[str, ...]

    @property
    def regressions(self) -> list[CaseDelta]:
        return [d for d in self.deltas if d.regression]


def compare_files(old_path: str | Path, new_path: str | Path, criteria: S.Criteria,
                  higher_is_better: bool | None = None) -> Comparison2:
    """Match records by case key; NEW/OLD ratio and verdict per case (or a status change for parity)."""
    old, new = load(old_path), load(new_path)
    if old.kind != new.kind:
        raise InputError(f"cannot compare a {old.kind!r} file with a {new.kind!r} file")
    view = VIEWS.get(old.kind, View((), ("case",), ("value",)))
    old_df, new_df = frame(old, all_columns=True), frame(new, all_columns=True)
    key = [k for k in view.key if k in old_df.columns and k in new_df.columns]
    if not key:
        raise InputError(f"{old.path.name}: records have no {'/'.join(view.key)} column to match cases by")
    if old.kind == "parity":
        return _compare_status(old_df, new_df, key)
    column = next((v for v in view.values if v in old_df.columns and v in new_df.columns), None)
    if column is None:
        raise InputError(f"{old.kind} records carry none of {', '.join(view.values) or 'value'}: nothing to compare")
    if higher_is_better is None:
        higher_is_better = _file_direction(old) if old.kind == "ab" else view.higher_is_better
    crit = S.Criteria(higher_is_better, criteria.same_band, criteria.fail_on_regression, criteria.confidence)
    unit = _file_unit(old) if old.kind == "ab" else ""
    return _compare_values(old.kind, column, _samples(old_df, key, column), _samples(new_df, key, column), crit,
                           unit)


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


def _compare_values(kind: str, column: str, old: dict, new: dict, crit: S.Criteria,
                    unit: str = "") -> Comparison2:
    deltas = []
    for key in [k for k in old if k in new]:
        result = S.compare_samples(old[key], new[key], crit)
        deltas.append(CaseDelta(key, _mean_text(old[key], unit), _mean_text(new[key], unit), result,
                                regression=result.regression))
    return Comparison2(kind, column, tuple(deltas), _names(old, new), _names(new, old))


def _mean_text(values: list[float], unit: str = "") -> str:
    """The mean, in the file's unit where known, with n when there are several samples."""
    mean = sum(values) / len(values)
    text = S.format_value(mean, unit) if unit else f"{mean:.6g}"
    return text + (f" (n={len(values)})" if len(values) > 1 else "")


def _names(a: dict, b: dict) -> tuple[str, ...]:
    return tuple(" / ".join(k) for k in a if k not in b)


def _compare_status(old_df, new_df, key: list[str]) -> Comparison2:
    """Parity: a case that passed in OLD and does not pass in NEW is a regression."""
    def statuses(df):
        return {tuple(str(r[k]) for k in key): str(r.get("status", "")) for r in df.to_dict("records")}

    old, new = statuses(old_df), statuses(new_df)
    deltas = []
    for k in [k for k in old if k in new]:
        change = f"{old[k]} -> {new[k]}" if old[k] != new[k] else old[k]
        deltas.append(CaseDelta(k, old[k], new[k], None, change, old[k] == "PASS" and new[k] != "PASS"))
    return Comparison2("parity", "status", tuple(deltas), _names(old, new), _names(new, old))


COMPARE_HEADERS = ["case", "old", "new", "NEW/OLD", "NEW vs OLD 95% CI", "verdict", "reason"]


def compare_rows(result: Comparison2) -> list[list[str]]:
    rows = []
    for d in result.deltas:
        if d.result is None:
            verdict = "REGRESSION" if d.regression else ("SAME" if d.old == d.new else "CHANGED")
            rows.append([d.name, d.old, d.new, "", "", verdict, d.status_change])
            continue
        r = d.result
        reason = r.reason + (f"; {r.regression_reason}" if r.regression_reason else "")
        rows.append([d.name, d.old, d.new, f"{r.ratio:.4f}", S.format_interval(r.rel_ci, percent=True),
                     r.verdict.value + (" (REGRESSION)" if d.regression else ""), reason])
    return rows


def render_compare(result: Comparison2, fmt: str, console=None) -> str | None:
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


def text_of(render, *args, **kwargs) -> str:
    """Capture what a printing renderer writes (for tests and --format md of rich output)."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=160, color_system=None)
    text = render(*args, console=console, **kwargs)
    return text if text is not None else buf.getvalue()
