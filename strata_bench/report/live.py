"""Live rendering for the GPU commands: the stdout console, the parity table (terminal and markdown) and
the parity counts per device (a run with `--device all` shows each device's cases, failures and faults)."""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.table import Table

from strata_bench.checks.outcome import DeviceCounts, device_counts  # noqa: F401  (rendered here)


PIPED_WIDTH = 200  # wide enough that case names and hashes stay on one line in a log or a pipe


def stdout_console() -> Console:
    """A console on stdout: the terminal's width on a terminal; piped or captured, $COLUMNS where it is set
    (the width a user asks for), else PIPED_WIDTH."""
    console = Console()
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH)


def _checks_text(result) -> str:
    """The check kinds run, failed ones in capitals: 'written finite bitwise COLUMNS f64'."""
    kinds: dict[str, bool] = {}
    for check in result.checks:
        kinds[check.check] = kinds.get(check.check, True) and check.ok
    return " ".join(k if ok else k.upper() for k, ok in kinds.items()) or result.error[:60]


def _ratio_text(result) -> str:
    ratio = result.worst_ratio
    return "-" if ratio is None else f"{ratio:.2e}"


def _has_models(results) -> bool:
    return any(c.check == "err-model" for r in results for c in r.checks)


def _model_text(result) -> str:
    """Each variant judged by its error model: its max|err| and the ratio to the baseline's, worst over the
    references ('eng 2.30e-04 = 4.2 x old'; 'x old (0)' where the baseline's error is 0)."""
    worst: dict[str, Any] = {}
    for c in result.checks:
        if c.check == "err-model" and (c.variant not in worst or (c.baseline_ratio or 0) > (worst[c.variant]
                                                                                             .baseline_ratio or 0)):
            worst[c.variant] = c
    parts = []
    for variant, c in worst.items():
        ratio = c.baseline_ratio
        times = "-" if ratio is None else ("inf" if ratio == float("inf") else f"{ratio:.3g}")
        parts.append(f"{variant} {c.max_err:.2e} = {times} x {result.case.variants[0]}")
    return ", ".join(parts) or "-"


def _first_failure(result) -> str:
    if result.error:
        return result.error
    return next((c.detail for c in result.checks if not c.ok), "")


def _several_devices(results) -> bool:
    return len({r.device for r in results}) > 1


def _failure_line(r) -> str:
    return f"{r.case.name} on device {r.device}: {_first_failure(r)}"


def print_parity_table(results, console: Console | None = None, rerun: Callable[[Any], str] | None = None) -> None:
    """A row per case (variants, checks, worst ratio, verdict; the device when the run used several),
    then one line per case that did not pass, naming its device, and with `rerun` (a result -> the
    command that reruns it) that command on the next line."""
    console = console or stdout_console()
    several = _several_devices(results)
    table = Table(title="strata-bench parity", show_lines=False)
    models = _has_models(results)
    for col in (("case",) + (("device",) if several else ()) + ("variants", "checks", "max|err|/max|ref|")
                + (("max|err| vs baseline",) if models else ()) + ("verdict",)):
        table.add_column(col, overflow="fold")
    for r in results:
        style = "green" if r.status.value == "PASS" else "bold red"
        table.add_row(r.case.name, *((str(r.device),) if several else ()), " vs ".join(r.case.variants),
                      _checks_text(r), _ratio_text(r), *((_model_text(r),) if models else ()),
                      f"[{style}]{r.status.value}[/{style}]")
    console.print(table)
    for r in results:
        if r.status.value != "PASS":
            console.print(f"[bold red]{r.status.value}[/] {_failure_line(r)}", soft_wrap=True)
            if rerun is not None:  # as plain text on one line, to be copied: a regex's [..] is not markup
                console.print(f"  rerun: {rerun(r)}", markup=False, highlight=False, soft_wrap=True)


def parity_markdown(results, counts: Sequence[DeviceCounts] = (), rerun: Callable[[Any], str] | None = None) -> str:
    """The parity table as markdown for a pull request (a device column when the run used several), the
    counts per device when given, then a list of the failures, each naming its device (and, with
    `rerun`, the command that reruns it)."""
    several = _several_devices(results)
    device_head, device_rule = ("device | ", "---|") if several else ("", "")
    models = _has_models(results)
    model_head, model_rule = ("max\\|err\\| vs baseline | ", "---|") if models else ("", "")
    lines = [f"| case | {device_head}variants | checks | max\\|err\\|/max\\|ref\\| | {model_head}verdict |",
             f"|---|{device_rule}---|---|---|{model_rule}---|"]
    for r in results:
        device_cell = f"{r.device} | " if several else ""
        model_cell = f"{_model_text(r)} | " if models else ""
        lines.append(f"| `{r.case.name}` | {device_cell}{' vs '.join(r.case.variants)} | {_checks_text(r)} | "
                     f"{_ratio_text(r)} | {model_cell}{r.status.value} |")
    if counts:
        lines += ["", "| device | name | cases | failures | faults | not run |", "|---|---|---|---|---|---|"]
        lines += [f"| {c.device} | {c.name} | {c.cases} | {c.failures} | {c.faults} | {c.not_run} |" for c in counts]
    failures = [r for r in results if r.status.value != "PASS"]
    if failures:
        lines += ["", "Failures:", ""]
        for r in failures:
            lines.append(f"- `{r.case.name}` on device {r.device}: {_first_failure(r)}")
            if rerun is not None:
                lines.append(f"  rerun: `{rerun(r)}`")
    return "\n".join(lines)
