"""A/B outcomes as text: a table per arm, the paired result in the order a reviewer reads it,
failures and notes; as rich tables, markdown for a pull request, or JSON."""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

from strata_bench.ab.errorline import shown_line
from strata_bench.report.ab_metrics import (arm_label, command_lines, matrix_headers, matrix_rows, metric_headers,
                                            metric_rows, shift_text)
from strata_bench.stats.format import (describe_dominance, format_diff, format_interval, format_mean_sd,
                                        format_ratio, format_value)
from strata_bench.report.frame import markdown_table
from strata_bench.stats.verdict import signed_percent


def _unit(outcome) -> str:
    """The unit of the case's first metric (the one the arm and result tables show), --unit applied."""
    return outcome.metrics[0].unit if outcome.metrics else outcome.plan.unit


def arm_rows(outcome) -> list[list[str]]:
    """Per arm: label, runs, failed, n, mean +/- sd, median, min..max, outliers (what it runs heads the
    output: a command in a column wraps over many lines at 80 columns)."""
    unit = _unit(outcome)
    rows = []
    for label, arm in (("A", outcome.comparison.a), ("B", outcome.comparison.b)):
        runs = [r for r in outcome.runs if r.arm == label]
        failed = sum(not r.ok for r in runs)
        span = (f"{format_value(arm.min, unit)} .. {format_value(arm.max, unit)}" if arm.n else "n/a")
        rows.append([arm_label(label, outcome.arms.get(label)), str(len(runs)), str(failed), str(arm.n),
                     format_mean_sd(arm, unit), format_value(arm.median, unit), span, str(len(arm.outliers)),
                     _cpu_text(runs)])
    return rows


# "runs" counts warm-up runs too; "n" is the measured successful runs the statistics use.
ARM_HEADERS = ["arm", "runs", "failed", "n", "mean +/- sd", "median", "min .. max", "outliers", "CPU user / sys"]


def _cpu_text(runs) -> str:
    """Mean user and system CPU seconds of the measured successful runs that recorded them ('n/a' else)."""
    measured = [r for r in runs if r.ok and not r.warmup and "cpu_user_s" in r.details]
    if not measured:
        return "n/a"
    user = sum(float(r.details["cpu_user_s"]) for r in measured) / len(measured)
    system = sum(float(r.details["cpu_system_s"]) for r in measured) / len(measured)
    return f"{format_value(user, 's')} / {format_value(system, 's')}"


def comparison_rows(outcome) -> list[tuple[str, str]]:
    """The paired result as (what, value) rows, in the order a reviewer reads them."""
    c, unit = outcome.comparison, _unit(outcome)
    p = c.paired
    name = outcome.plan.metric
    if len(outcome.metrics) > 1:
        name = f"{outcome.metrics[0].name} (the first of the metrics below)"
    rows = [("metric", f"{name} ({'higher' if c.criteria.higher_is_better else 'lower'} is better)"),
            ("order", f"{outcome.plan.order}, {outcome.plan.pairs} pairs, {outcome.plan.warmup} warm-up pair(s), "
                      f"seed {outcome.plan.seed}")]
    if p is None:
        rows.append(("B - A (paired)", "n/a: no complete pair"))
    else:
        rows += [("B vs A (robust)", f"{shift_text(p)}: Hodges-Lehmann shift of log(B/A) over {p.n} pairs, "
                                     f"{_ci_method(p)}; the verdict reads this"),
                 ("B - A (paired)", f"{format_diff(p, unit)}, mean +/- 95% CI half-width, {p.n} pairs"),
                 ("sd of B - A", format_value(p.sd_diff, unit) if math.isfinite(p.sd_diff) else "n/a"),
                 ("95% CI (t)", format_interval(p.ci_t, unit)),
                 ("95% CI (bootstrap)", format_interval(p.ci_boot, unit)),
                 ("B vs A, 95% CI (t)", format_interval(p.rel_ci, percent=True) + " (mean-based cross-check)"),
                 ("ratio B/A [95% CI]", format_ratio(p.ratio, p.ratio_ci)),
                 ("Wilcoxon p", _p_text(p.wilcoxon_p, p.wilcoxon_note)),
                 ("position effect", _position_text(p))]
    rows += [("dominance", describe_dominance(c.dominance, c.criteria.higher_is_better)),
             ("outliers", _outlier_text(outcome)),
             ("drift", ("WARNING: " if c.drift.flagged else "") + c.drift.note),
             ("verdict", f"{c.verdict.value}: {c.reason}")]
    if c.regression_reason:
        rows.append(("regression", ("FAIL: " if c.regression else "") + c.regression_reason))
    return rows


IDENTITY_HEADERS = ["output", "A", "B", "identical"]


def identity_rows(outcome) -> list[list[str]]:
    """One row per --same entry: A's text, B's text (missing where the arm never printed it), and whether
    every run of both arms printed the same."""
    return [[row.name, _short(row.a_value), _short(row.b_value), _identical(row)] for row in outcome.identity]


def _identical(row) -> str:
    if row.same:
        return "yes"
    return "; ".join(filter(None, ("NO: " + row.mismatch if row.mismatch else "",
                                   "MISSING: " + row.missing if row.missing else "")))


def _identity_md_rows(outcome) -> list[list[str]]:
    """identity_rows with the printed texts as code (a missing one stays plain words)."""
    return [[name, *(text if value is None else f"`{text}`" for text, value in ((a, row.a_value), (b, row.b_value))),
             identical] for row, (name, a, b, identical) in zip(outcome.identity, identity_rows(outcome))]


def _short(text: str | None, width: int = 24) -> str:
    if text is None:
        return "missing"
    return text if len(text) <= width else text[:width - 3] + "..."


def _ci_method(p) -> str:
    if p.shift_ci is None:
        return "no interval"
    if p.shift_ci.method.startswith("t "):
        return "t interval (fewer than 6 pairs: no 95% signed-rank interval exists)"
    return "exact signed-rank 95% CI"


def _position_text(p) -> str:
    pe = p.position
    if pe is None:
        return "n/a (needs 2+ pairs in each order)"
    t = "" if pe.t is None else f", t={pe.t:.2f}, p={pe.p:.3g}"
    return (f"{signed_percent(pe.position, 2)} for running second ({pe.a_first} pairs A first, "
            f"{pe.b_first} B first{t}; 2x2 crossover, ABBA cancels it)")


def _is_matrix(outcomes) -> bool:
    return len(outcomes) > 1 and all(o.plan.params for o in outcomes)


def _p_text(p: float | None, note: str) -> str:
    text = "n/a" if p is None else f"{p:.3g}"
    return f"{text} ({note})" if note else text


def _outlier_text(outcome) -> str:
    c = outcome.comparison
    parts = [f"{label}: {len(arm.outliers)}" for label, arm in (("A", c.a), ("B", c.b)) if arm.outliers]
    if c.paired is not None and c.paired.pair_outliers:
        parts.append(f"pairs: {len(c.paired.pair_outliers)}")
    return (", ".join(parts) + " (modified z > 3.5, kept)") if parts else "none (modified z > 3.5)"


def failure_lines(outcome) -> list[str]:
    """One line per failed run, with its reason and the first error-looking line of its (or its server's)
    output, else the last line it printed."""
    lines = []
    for r in outcome.failures:
        line = shown_line(dict(r.details))
        kind = "warm-up" if r.warmup else f"pair {r.pair}"
        lines.append(f"run {r.run_index} ({r.arm}, {kind}): {r.failure}" + (f" | {line}" if line else ""))
    return lines


def print_ab(outcomes, console=None) -> None:
    """Rich tables: arms, then the paired comparison, failures and notes, for each case."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    for role, text in command_lines(outcomes):
        console.print(f"{role}: {text}", soft_wrap=True, markup=False, highlight=False)
    if _is_matrix(outcomes):
        _print_table(console, "A/B by parameter", matrix_headers(outcomes), matrix_rows(outcomes))
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
        _print_table(console, f"metrics: {outcome.case}", metric_headers(outcome),
                     metric_rows(outcome) if _several(outcome) else [])
        _print_table(console, f"identity: {outcome.case}", IDENTITY_HEADERS, identity_rows(outcome))
        for line in failure_lines(outcome):
            console.print(f"[red]failed[/red] {line}", soft_wrap=True, markup=True, highlight=False)
        for note in outcome.notes():
            console.print(f"note: {note}", soft_wrap=True, highlight=False)


def _several(outcome) -> bool:
    """The per-metric table is shown when there is more than one metric (else it repeats the result)."""
    return len(outcome.metrics) > 1


def _print_table(console, title: str, headers: list[str], rows: list[list[str]]) -> None:
    from rich.table import Table

    if not rows:
        return
    table = Table(title=title)
    for head in headers:
        table.add_column(head, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)


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
    """Markdown for a pull request: the commands first; with --param, one table of every metric and
    parameter value; then an arm table and a result table per case, failures and notes."""
    parts = ["**Commands**", ""] + [f"- {role}: `{text}`" for role, text in command_lines(outcomes)] + [""]
    if _is_matrix(outcomes):
        parts += ["**A/B by parameter**", "", markdown_table(matrix_headers(outcomes), matrix_rows(outcomes)), ""]
    for outcome in outcomes:
        parts += [f"**A/B: `{outcome.case}`**", "", markdown_table(ARM_HEADERS, arm_rows(outcome)), "",
                  markdown_table(["", "result"], [[f"**{w}**", v] for w, v in comparison_rows(outcome)])]
        if _several(outcome):
            parts += ["", markdown_table(metric_headers(outcome), metric_rows(outcome))]
        if outcome.identity:
            parts += ["", markdown_table(IDENTITY_HEADERS, _identity_md_rows(outcome))]
        extra = [f"- failed: {line}" for line in failure_lines(outcome)] + [f"- note: {n}" for n in outcome.notes()]
        parts += ([""] + extra) if extra else []
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def ab_json(outcomes, extra: Mapping[str, Any] | None = None) -> str:
    body = {"cases": [o.summary() for o in outcomes], **dict(extra or {})}
    return json.dumps(body, indent=2, default=str)


def render_ab(outcomes, fmt: str, console=None) -> str | None:
    """Text for md/json (the caller echoes it); the table format prints directly (returns None)."""
    if fmt == "md":
        return ab_markdown(outcomes)
    if fmt == "json":
        return ab_json(outcomes)
    print_ab(outcomes, console)
    return None
