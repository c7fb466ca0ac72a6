"""Options shared by several commands, each defined once as a decorator."""
from __future__ import annotations

import click

from strata_bench.cases import CaseFilter


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def case_filter_options(func):
    """--family, --format, -k REGEX, --kernels DIR, --cases FILE.py (filters into `case_filter`)."""
    func = click.option("--cases", "cases_file", type=click.Path(dir_okay=False),
                        help="Python file declaring extra families/cases (same API as the built-ins).")(func)
    func = click.option("--kernels", "kernels_dir", type=click.Path(file_okay=False),
                        help="Directory of extra kernel sources the --cases file compiles.")(func)
    func = click.option("-k", "pattern", metavar="REGEX", help="Only cases whose name matches REGEX.")(func)
    func = click.option("--format", "formats", multiple=True, metavar="FMT[,FMT]",
                        help="Only these quant formats.")(func)
    func = click.option("--family", "families", multiple=True, metavar="NAME[,NAME]",
                        help="Only these kernel families.")(func)
    return func


def make_filter(families: tuple[str, ...], formats: tuple[str, ...], pattern: str | None) -> CaseFilter:
    return CaseFilter(_split(families), _split(formats), pattern)


# Shared options. Each is defined here once; a command may give its own help sentence where the
# option means something more specific there (parity's --results names parity files).

DEVICE_HELP = "GPU index, or 'all' to run every case on each GPU."
RESULTS_HELP = "Where to keep the raw records and the summary (DIR/<device>/<command>-*.json)."
OUTPUT_HELP = "Print as a rich table (default), markdown for a pull request, or JSON."


def device_option(help: str = DEVICE_HELP, single: bool = False):
    """--device N|all (default 0) into `device_spec`; with `single`, --device N (an int) into `device`."""
    if single:
        return click.option("--device", type=int, default=0, show_default=True, help="GPU index.")
    return click.option("--device", "device_spec", default="0", show_default=True, metavar="N|all", help=help)


def results_option(help: str = RESULTS_HELP):
    """--results DIR (default results) into `results_dir`."""
    return click.option("--results", "results_dir", type=click.Path(file_okay=False), default="results",
                        show_default=True, help=help)


def quiet_option(func):
    """--quiet / -q: no progress bar."""
    return click.option("--quiet", "-q", is_flag=True, help="No progress bar.")(func)


def output_option(choices=("table", "md", "json"), help: str = OUTPUT_HELP, format_alias: bool = False,
                  short: bool = True):
    """--output / -o into `output`.

    Without `format_alias` the default is None: the command's --format filters quant formats, and
    `split_output_format` takes `--format md|json` as the output. With it, `--format` is this
    option's first name and the default is `table` (commands that have no quant filter).
    """
    names = (("--format", "--output") if format_alias else ("--output",)) + (("-o",) if short else ())
    if format_alias:
        return click.option(*names, "output", type=click.Choice(choices), default="table", show_default=True,
                            help=help)
    return click.option(*names, "output", type=click.Choice(choices), default=None, help=help)


OUTPUT_FORMATS = ("table", "md", "csv", "json")


def split_output_format(formats: tuple[str, ...], output: str | None) -> tuple[tuple[str, ...], str | None]:
    """`--format` filters quant formats, but `--format md|json` (as issues and users write it) means the
    output format; split those values out so both spellings work."""
    values = _split(formats)
    quant = tuple(v for v in values if v not in OUTPUT_FORMATS)
    chosen = [v for v in values if v in OUTPUT_FORMATS]
    return quant, output or (chosen[-1] if chosen else None)
