"""Every option and argument of every command given bad values, each run as a user would (a fresh process in a
folder of its own, under a time limit), and judged by the CLI's rules: no traceback, no hang, an exit code of
0, 1, 2 or 77, a usage error in one stderr line, nothing written by a refused command, no process left.

    PYTHONPATH=$PWD python scripts/bad_input_battery.py [--tree DIR] [--jobs N] [--csv FILE] [--md FILE]
        [--only OPTION ...] [--value VALUE ...]

--tree runs another checkout's strata_bench (e.g. `git archive` of an earlier commit) for a before/after table.
The values are generated from each command's click parameters, so a new option is tried without an edit here.
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 60
TAG = "STRATA_BATTERY_RUN"
BAD = ["", "-1", "0", "99999999999999999999", "1e308", "nan", "inf", "x" * 5000, "\udcff\udcfe", "/dev/zero", "/",
       "/nonexistent/x", "{fifo}", "{folder}", "{empty}", "{binary}"]


@dataclass(frozen=True)
class Trial:
    command: tuple[str, ...]
    label: str  # which option got which value
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    trial: Trial
    code: int | None  # None: killed at the time limit
    traceback: bool
    stderr_lines: int
    written: int  # files a refused command left in its folder
    left: int  # processes still running with the run's tag

    @property
    def problems(self) -> list[str]:
        out = []
        if self.code is None:
            out.append("hang")
        elif self.code not in (0, 1, 2, 77, 141):
            out.append(f"exit {self.code}")
        if self.traceback:
            out.append("traceback")
        if self.code == 2 and self.stderr_lines != 1:
            out.append(f"{self.stderr_lines} lines")
        if self.code == 2 and self.written:
            out.append("written")
        if self.left:
            out.append("left")
        return out


def base_args(results: Path) -> dict[tuple[str, ...], list[str]]:
    """What each command needs beside the option under test, so the option alone is what is bad."""
    ab_file = next(iter(sorted(results.glob("nvidia-h200/ab-*.json"))), None)
    bench = next(iter(sorted(results.glob("nvidia-h200/bench-*.json"))), None)
    return {
        ("parity",): ["--family", "q8_1", "--list"], ("bench",): ["--family", "q8_1", "--list"],
        ("ab",): ["--a", "true", "--b", "true", "--pairs", "2", "--warmup", "0", "-q"],
        ("compile",): ["--arch", "90", "--family", "q8_1"], ("env",): [],
        ("report",): [str(bench)], ("plot",): [str(ab_file)], ("compare",): [str(bench), str(bench)],
        ("results", "verify"): [], ("fixtures", "list"): [], ("fixtures", "verify"): [],
        ("engine", "build"): ["--dry-run", str(ROOT)],
    }


def trials(tree: Path) -> list[Trial]:
    sys.path.insert(0, str(tree))
    from strata_bench.cli.main import cli  # the tree's own commands and options

    import click

    out = []
    for path, base in base_args(ROOT / "results").items():  # the same files for every tree compared
        command = cli
        for name in path:
            command = getattr(command, "commands", {}).get(name)
            if command is None:
                break
        if command is None:
            continue
        arguments = [p for p in command.params if isinstance(p, click.Argument)]
        for param in command.params:
            if isinstance(param, click.Option) and (param.is_flag or param.count) or param.name == "help":
                continue
            flag = next((o for o in param.opts if o.startswith("--")), param.opts[0]) if param.opts else None
            for value in BAD:
                if isinstance(param, click.Argument):
                    at = arguments.index(param)
                    args = [value if i == at else a for i, a in enumerate(base)] if len(base) > at else [*base, value]
                else:
                    args = [*base, flag, value]
                out.append(Trial(path, f"{flag or param.name}={value[:12]!r}", tuple(args)))
    return out


def selected(trial: Trial, options: list[str], values: list[str]) -> bool:
    """Whether `trial` tries one of `options` (flags, or argument names) with one of `values`; an empty list
    selects all."""
    option, shown = trial.label.split("=", 1)
    return (not options or option in options) and (not values or shown in {repr(v[:12]) for v in values})


def fill(value: str, work: Path) -> str:
    places = {"{fifo}": work / "pipe", "{folder}": work / "dir", "{empty}": work / "empty.json",
              "{binary}": work / "bin.json"}
    if value in places:
        target = places[value]
        if value == "{fifo}":
            os.mkfifo(target)
        elif value == "{folder}":
            target.mkdir()
        else:
            target.write_bytes(b"" if value == "{empty}" else bytes(range(256)) * 4)
        return str(target)
    return value


def run(trial: Trial, tree: Path) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="battery-") as work_dir:
        work = Path(work_dir)
        (work / "in").mkdir()
        argv = [fill(a, work / "in") for a in trial.argv]
        before = {p for p in work.rglob("*")}
        tag = uuid.uuid4().hex
        env = {**os.environ, "PYTHONPATH": str(tree), TAG: tag, "STRATA_CACHE_DIR": str(work / "cache"),
               "STRATA_RESULTS_DIR": str(work / "results")}
        command = [sys.executable, "-m", "strata_bench", *trial.command,
                   *[a.encode("utf-8", "surrogateescape") for a in argv]]
        try:
            done = subprocess.run(command, cwd=work, env=env, capture_output=True, timeout=TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
            code, err = done.returncode, done.stderr
        except subprocess.TimeoutExpired as exc:
            code, err = None, exc.stderr or b""
        time.sleep(0.05)
        left = _tagged(tag)
        for p in left:
            p.kill()
        written = [p for p in work.rglob("*") if p not in before and "cache" not in p.parts]
        text = err.decode("utf-8", "replace")
        lines = [line for line in text.splitlines() if line.strip()]
        return Outcome(trial, code, "Traceback (most recent call last)" in text, len(lines), len(written), len(left))


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG) == tag:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def _kind(problem: str) -> str:
    """The table column of a problem: 'exit 5' -> exit, '3 lines' -> lines, else itself."""
    words = problem.split()
    return "exit" if words[0] == "exit" else words[-1]


def table(outcomes: list[Outcome]) -> str:
    rows: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = rows.setdefault(" ".join(o.trial.command), {"inputs": 0, "traceback": 0, "hang": 0, "written": 0,
                                                          "left": 0, "exit": 0, "lines": 0})
        row["inputs"] += 1
        for problem in o.problems:
            row[_kind(problem)] += 1
    head = ("| command | inputs | tracebacks | hangs | written | processes left | other exit codes | "
            "usage errors not one line |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for name, r in sorted(rows.items()):
        lines.append(f"| {name} | {r['inputs']} | {r['traceback']} | {r['hang']} | {r['written']} | {r['left']} | "
                     f"{r['exit']} | {r['lines']} |")
    total = {k: sum(r[k] for r in rows.values()) for k in ("inputs", "traceback", "hang", "written", "left", "exit",
                                                            "lines")}
    lines.append(f"| all | {total['inputs']} | {total['traceback']} | {total['hang']} | {total['written']} | "
                 f"{total['left']} | {total['exit']} | {total['lines']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose strata_bench runs")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--csv", type=Path, help="every input and its outcome")
    parser.add_argument("--md", type=Path, help="the per-command table")
    parser.add_argument("--only", action="append", default=[], metavar="OPTION",
                        help="only the trials of this option or argument name, e.g. --only=--results (repeatable)")
    parser.add_argument("--value", action="append", default=[], metavar="VALUE",
                        help="only the trials of this bad value, e.g. --value='' (repeatable)")
    args = parser.parse_args()
    tree = args.tree.resolve()
    planned = [t for t in trials(tree) if selected(t, args.only, args.value)]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(lambda t: run(t, tree), planned))
    text = table(outcomes)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")
    if args.csv:
        with args.csv.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["command", "input", "exit", "problems"])
            for o in outcomes:
                writer.writerow([" ".join(o.trial.command), o.trial.label, o.code, "; ".join(o.problems)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
