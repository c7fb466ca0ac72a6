"""`ab`'s hyperfine conveniences, as one decorator and one value: a parameter scan (-P NAME MIN MAX
[--step S]), names per command (-n), --ignore-failure, --show-output and exports to files."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import click

from strata_bench.cli.options import SAID
from strata_bench.errors import InputError
from strata_bench.files import write_problem

EXPORTS = (("export_markdown", "--export-markdown", "md"), ("export_json", "--export-json", "json"),
           ("export_csv", "--export-csv", "csv"))


@dataclass(frozen=True)
class Extras:
    """What the conveniences ask for; empty when none is given."""

    scans: tuple[tuple[str, str, str], ...] = ()
    step: str | None = None
    names: tuple[str, ...] = ()
    ignore_failure: bool = False
    show_output: bool = False
    exports: tuple[tuple[str, str], ...] = ()  # (format, file): md, json or csv

    def check(self) -> None:
        """InputError before anything runs: at most two names, a --step only with -P, export folders there."""
        if len(self.names) > 2:
            raise InputError(f"-n/--name names A and B: give it at most twice, got {len(self.names)}")
        if self.step is not None and not self.scans:
            raise InputError("--step applies to a -P NAME MIN MAX scan")
        for fmt, path in self.exports:
            why = write_problem(path)
            if why is not None:  # found now: the whole run would be spent before its export failed
                raise InputError(f"cannot export {fmt} to {path or repr(path)}: {why}")


_OPTIONS = (
    click.option("-P", "--parameter-scan", "scans", nargs=3, multiple=True, metavar="NAME MIN MAX",
                 help="A --param whose values are MIN, MIN+STEP, ... MAX (repeatable; hyperfine's -P)."),
    click.option("--step", default=None, metavar="STEP", help="Step of the -P scans (default 1; decimals allowed)."),
    click.option("-n", "--name", "names", multiple=True, type=SAID, metavar="NAME",
                 help="Name arm A (first) and B (second) in the tables; the commands stay listed."),
    click.option("-i", "--ignore-failure", is_flag=True,
                 help="A nonzero exit code is recorded but is not a failed run (its figures still count)."),
    click.option("--show-output", is_flag=True, help="Print each run's output (and its server's) to stderr."),
    click.option("--export-markdown", "export_markdown", metavar="FILE", help="Also write the markdown to FILE."),
    click.option("--export-json", "export_json", metavar="FILE", help="Also write the JSON to FILE."),
    click.option("--export-csv", "export_csv", metavar="FILE", help="Also write one CSV row per run to FILE."),
)


def extras_options(func):
    """The options above, parsed into `extras` (an Extras) before the command runs."""

    @functools.wraps(func)
    def wrapper(*args, scans, step, names, ignore_failure, show_output, **kwargs):
        exports = tuple((fmt, kwargs.pop(key)) for key, _, fmt in EXPORTS if kwargs.get(key) is not None)
        for key, _, _ in EXPORTS:
            kwargs.pop(key, None)
        return func(*args, extras=Extras(tuple(scans), step, tuple(names), ignore_failure, show_output, exports),
                    **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def write_exports(extras: Extras, report) -> None:
    """Each export file, from the same renderers as the output (the CSV from the records file)."""
    from strata_bench.report.ab import render_ab

    for fmt, path in extras.exports:
        if fmt == "csv":
            from strata_bench.report.render import render_file

            text = render_file(report.summary_path, "csv") if report.summary_path else ""
        else:
            text = render_ab(report.outcomes, fmt)
        try:
            Path(path).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        except OSError as exc:  # what the check before the run could not foresee (a full disk, /proc)
            raise InputError(f"cannot export {fmt} to {path}: {exc.strerror or exc}") from None
        click.echo(f"exported {fmt}: {path}", err=True)
