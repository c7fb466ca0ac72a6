"""Live rendering for the GPU commands: the stdout console, the parity table (terminal and markdown) and
the parity counts per device (a run with `--device all` shows each device's cases, failures and faults)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

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


@dataclass(frozen=True)
class DeviceCounts:
    """One device's share of a parity run."""

    device: int
    name: str
    cases: int  # cases with a result on this device
    failures: int  # FAIL and FAULT
    faults: int
    not_run: int  # selected cases left after this device's fault (its context is gone)

    def to_record(self) -> dict[str, Any]:
        return {"device": self.device, "name": self.name, "cases": self.cases, "failures": self.failures,
                "faults": self.faults, "not_run": self.not_run}

    def text(self) -> str:
        """'device 1 (NVIDIA H200): 3 cases, 1 failure (1 fault), 2 not run'."""
        line = f"device {self.device} ({self.name}): {_count(self.cases, 'case')}, {_count(self.failures, 'failure')}"
        if self.faults:
            line += f" ({_count(self.faults, 'fault')})"
        return line + (f", {self.not_run} not run" if self.not_run else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def device_counts(results: Sequence[Any], devices: Sequence[int], names: Mapping[int, str] | None = None,
                  selected: int | None = None) -> list[DeviceCounts]:
    """Counts per device, in `devices` order; `selected` (cases per device) gives the cases not run."""
    out = []
    for device in devices:
        mine = [r for r in results if r.device == device]
        failures = sum(r.status.value != "PASS" for r in mine)
        faults = sum(r.status.value == "FAULT" for r in mine)
        not_run = max(0, selected - len(mine)) if selected is not None else 0
        out.append(DeviceCounts(device, (names or {}).get(device, "?"), len(mine), failures, faults, not_run))
    return out


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
