"""Live rendering for the GPU commands: the stdout console and the parity table (terminal and markdown)."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table


PIPED_WIDTH = 200  # wide enough that case names and hashes stay on one line in a log or a pipe


def stdout_console() -> Console:
    """A console on stdout: the terminal's width on a terminal, PIPED_WIDTH when piped or captured."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)


def _checks_text(result) -> str:
    """The check kinds run, failed ones in capitals: 'written finite bitwise COLUMNS f64'."""
    kinds: dict[str, bool] = {}
    for check in result.checks:
        kinds[check.check] = kinds.get(check.check, True) and check.ok
    return " ".join(k if ok else k.upper() for k, ok in kinds.items()) or result.error[:60]


def _ratio_text(result) -> str:
    ratio = result.worst_ratio
    return "-" if ratio is None else f"{ratio:.2e}"


def _first_failure(result) -> str:
    if result.error:
        return result.error
    return next((c.detail for c in result.checks if not c.ok), "")


def print_parity_table(results, console: Console | None = None) -> None:
    """A row per case (variants, checks, worst ratio, verdict), then one line per case that did not pass."""
    console = console or stdout_console()
    table = Table(title="strata-bench parity", show_lines=False)
    for col in ("case", "variants", "checks", "max|err|/max|ref|", "verdict"):
        table.add_column(col, overflow="fold")
    for r in results:
        style = "green" if r.status.value == "PASS" else "bold red"
        table.add_row(r.case.name, " vs ".join(r.case.variants), _checks_text(r), _ratio_text(r),
                      f"[{style}]{r.status.value}[/{style}]")
    console.print(table)
    for r in results:
        if r.status.value != "PASS":
            console.print(f"[bold red]{r.status.value}[/] {r.case.name}: {_first_failure(r)}", soft_wrap=True)


def parity_markdown(results) -> str:
    """The parity table as markdown for a pull request, then a list of the failures."""
    lines = ["| case | variants | checks | max\\|err\\|/max\\|ref\\| | verdict |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| `{r.case.name}` | {' vs '.join(r.case.variants)} | {_checks_text(r)} | "
                     f"{_ratio_text(r)} | {r.status.value} |")
    failures = [r for r in results if r.status.value != "PASS"]
    if failures:
        lines += ["", "Failures:", ""] + [f"- `{r.case.name}`: {_first_failure(r)}" for r in failures]
    return "\n".join(lines)
