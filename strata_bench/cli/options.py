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


def output_format_option(choices=("table", "md", "json")):
    return click.option("--format", "--output", "output", type=click.Choice(choices), default="table",
                        show_default=True, help="How to print the result.")


OUTPUT_FORMATS = ("table", "md", "csv", "json")


def split_output_format(formats: tuple[str, ...], output: str | None) -> tuple[tuple[str, ...], str | None]:
    """`--format` filters quant formats, but `--format md|json` (as issues and users write it) means the
    output format; split those values out so both spellings work."""
    values = _split(formats)
    quant = tuple(v for v in values if v not in OUTPUT_FORMATS)
    chosen = [v for v in values if v in OUTPUT_FORMATS]
    return quant, output or (chosen[-1] if chosen else None)
