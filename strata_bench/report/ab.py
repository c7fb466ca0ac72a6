"""A/B outcomes as text: a table per arm, the paired result in the order a reviewer reads it,
failures and notes; as rich tables, markdown for a pull request, or JSON."""
from __future__ import annotations

import json
import math
import shlex
from typing import Any, Mapping

from strata_bench.report.format import (describe_dominance, format_diff, format_interval, format_mean_sd,
                                        format_ratio, format_value)
from strata_bench.report.frame import markdown_table


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
        span = (f"{format_value(arm.min, unit)} .. {format_value(arm.max, unit)}" if arm.n else "n/a")
        rows.append([label, describe_arm(outcome.arms.get(label, {})), str(len(runs)), str(failed), str(arm.n),
                     format_mean_sd(arm, unit), format_value(arm.median, unit), span,
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
        rows += [("B - A (paired)", f"{format_diff(p, unit)}, mean +/- 95% CI half-width, {p.n} pairs"),
                 ("sd of B - A", format_value(p.sd_diff, unit) if math.isfinite(p.sd_diff) else "n/a"),
                 ("95% CI (t)", format_interval(p.ci_t, unit)),
                 ("95% CI (bootstrap)", format_interval(p.ci_boot, unit)),
                 ("B vs A, 95% CI", format_interval(p.rel_ci, percent=True)),
                 ("ratio B/A [95% CI]", format_ratio(p.ratio, p.ratio_ci)),
                 ("Wilcoxon p", _p_text(p.wilcoxon_p, p.wilcoxon_note))]
    rows += [("dominance", describe_dominance(c.dominance, c.criteria.higher_is_better)),
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
    arms = (("A", outcome.comparison.a), ("B", outcome.comparison.b))
    parts = [f"{label}: {len(arm.outliers)}" for label, arm in arms if arm.outliers]
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


def render_ab(outcomes, fmt: str, console=None) -> str | None:
    """Text for md/json (the caller echoes it); the table format prints directly (returns None)."""
    if fmt == "md":
        return ab_markdown(outcomes)
    if fmt == "json":
        return ab_json(outcomes)
    print_ab(outcomes, console)
    return None
