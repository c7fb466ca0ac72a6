"""Options shared by several commands, each defined once as a decorator."""
from __future__ import annotations

import functools
import math

import click

from strata_bench.cases.case import CaseFilter
from strata_bench.cases.request import CaseRequest
from strata_bench.errors import InputError
from strata_bench.files import UserPath


class FiniteFloat(click.FloatRange):
    """A FloatRange that refuses nan and inf: click's own lets them through (nan compares false with every
    bound), and `ab --timeout nan` then failed after writing its records."""

    name = "finite float"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class Said(click.ParamType):
    """Text that says something: '' or spaces are refused in one line. Read as "not given", they ran every
    case (`--family ''`), or a command that does nothing (`ab --setup ''`), and exited 0."""

    name = "text"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail(f"{value!r} is empty", param, ctx)
        return value


SAID = Said()


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def make_filter(families: tuple[str, ...], formats: tuple[str, ...], pattern: str | None) -> CaseFilter:
    return CaseFilter(_split(families), check_quant_formats(formats), pattern)


# Shared options. Each is defined here once; a command may give its own help sentence where the
# option means something more specific there (parity's --results names parity files). Every path option
# and argument has the type files.UserPath, which refuses '' (it lives below cli/ so that the extensions'
# own options, --cases, --variants and --ggml, share it).

DEVICE_HELP = "GPU index, or 'all' to run every case on each GPU."
RESULTS_HELP = "Where to keep the raw records and the summary (DIR/<device>/<command>-*.json)."
OUTPUT_HELP = "Print as a rich table (default), markdown for a pull request, or JSON."


def device_option(help: str = DEVICE_HELP, single: bool = False):
    """--device N|all (default 0) into `device_spec`; with `single`, --device N (an int) into `device`."""
    if single:
        return click.option("--device", type=int, default=0, show_default=True, help="GPU index.")
    return click.option("--device", "device_spec", type=SAID, default="0", show_default=True, metavar="N|all",
                        help=help)


def results_option(help: str = RESULTS_HELP, default: str | None = "results"):
    """--results DIR (default results; None: the command decides, e.g. command A/B) into `results_dir`."""
    return click.option("--results", "results_dir", type=UserPath(file_okay=False), default=default,
                        show_default=default is not None, help=help)


def quiet_option(func):
    """--quiet / -q: no progress bar."""
    return click.option("--quiet", "-q", is_flag=True, help="No progress bar.")(func)


def output_option(choices=("table", "md", "json"), help: str = OUTPUT_HELP):
    """-o / --output into `output` (default table): every command spells it so; `--format` is only ever the
    quant-format filter."""
    return click.option("-o", "--output", "output", type=click.Choice(choices), default="table", show_default=True,
                        help=help)


def _writable(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An output file a run writes at its end, checked before the run: one usage line where it cannot be."""
    if value is None:
        return None
    from strata_bench.files import write_problem

    problem = write_problem(value)
    if problem is not None:
        raise InputError(f"--junit {value!r}: cannot be written: {problem}")
    return value


def junit_option(func):
    """--junit FILE into `junit_path`: the run's cases and variants as JUnit XML for a CI's test report, checked
    writable before anything runs."""
    return click.option("--junit", "junit_path", metavar="FILE", callback=_writable,
                        help="Also write the results as JUnit XML (a test case per case and variant, a failure's "
                             "diagnosis as its message); GitHub Actions' $GITHUB_STEP_SUMMARY, where set, gets "
                             "the markdown table.")(func)


OUTPUT_FORMATS = ("table", "md", "csv", "json")


def check_quant_formats(formats: tuple[str, ...]) -> tuple[str, ...]:
    """--format values, split at commas; an output format given there is a usage error naming -o."""
    values = _split(formats)
    misplaced = [v for v in values if v in OUTPUT_FORMATS]
    if misplaced:
        raise InputError(f"--format takes quant formats, got {misplaced[0]!r}; the output format is "
                         f"-o {misplaced[0]}")
    return values


# --- what a command runs beyond the filters: shapes, real weights, TOML variants ---------------------
def parse_shape(value: str | None) -> tuple[int, int] | None:
    """'ROWSxCOLS' -> (rows, cols); InputError naming the value otherwise."""
    if not value:
        return None
    try:
        rows, cols = (int(v) for v in value.lower().split("x"))
    except ValueError:
        raise InputError(f"--shape must be ROWSxCOLS, got {value!r}") from None
    if rows <= 0 or cols <= 0:
        raise InputError(f"--shape must be positive, got {value!r}")
    return rows, cols


def parse_cols(value: str | None) -> tuple[int, ...] | None:
    """'1,4,8' -> (1, 4, 8); InputError naming the value otherwise."""
    if not value:
        return None
    try:
        cols = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise InputError(f"--cols must be a comma list of integers, got {value!r}") from None
    if not cols or min(cols) <= 0:
        raise InputError(f"--cols must be positive integers, got {value!r}")
    return cols


_FILTER_OPTIONS = (
    click.option("--family", "families", multiple=True, type=SAID, metavar="NAME[,NAME]",
                 help="Only these kernel families."),
    click.option("--format", "formats", multiple=True, type=SAID, metavar="FMT[,FMT]",
                 help="Only these quant formats."),
    click.option("-k", "pattern", type=SAID, metavar="REGEX", help="Only cases whose name matches REGEX."),
)

_REQUEST_OPTIONS = (
    click.option("--shape", type=SAID, metavar="ROWSxCOLS",
                 help="Replace each case's shape (e.g. 131072x8192, the DRAM shape); exit 2 where a format's "
                      "blocks do not divide COLS."),
    click.option("--cols", "cols_spec", type=SAID, metavar="N[,N]",
                 help="Sweep the column count (e.g. 1,2,4,8); with real weights, the columns (entries, tokens) "
                      "of each fixture's cases."),
    click.option("--fixtures", "fixture_patterns", multiple=True, metavar="PATTERN",
                 help="Run every selected family's cases over the fixtures whose names match the glob "
                      "(repeatable), instead of the default cases."),
    click.option("--gguf", "gguf_file", type=UserPath(dir_okay=False),
                 help="Run every selected family's cases over rows read from this GGUF file (with --tensor)."),
    click.option("--tensor", "tensor_regex", type=SAID, metavar="REGEX",
                 help="With --gguf: the tensors to read (re.search)."),
    click.option("--rows", "rows_spec", type=SAID, metavar="A:B",
                 help="With --gguf: rows A to B of each tensor (default 0:64)."),
)


def _rows(spec: str | None) -> tuple[int, int] | None:
    if spec is None:
        return None
    from strata_bench.data.gguf_import import parse_rows  # brings numpy: only where --rows is given

    return parse_rows(spec)


def _extension_options() -> list:
    from strata_bench.cases.extensions import extension_types

    return [option for ext in extension_types() for option in ext.options]


def _pop_extensions(kwargs: dict) -> tuple:
    """The extensions the command line asked for; their options' values leave `kwargs`."""
    from strata_bench.cases.extensions import extension_types, extensions_from, option_names

    names = [n for ext in extension_types() for n in option_names(ext)]
    return extensions_from({n: kwargs.pop(n) for n in names})


def run_options(purpose: str = "parity"):
    """Every option that declares a run's cases (the filters, the sweep and real weights, every extension's
    own), parsed into `spec` (a cases/spec.RunSpec) before the command runs; the command's --device N|all,
    where it has one, is read into the spec too. Each option is declared once, here or in its extension."""

    def decorate(func):
        @functools.wraps(func)
        def wrapper(*args, families, formats, pattern, shape, cols_spec, fixture_patterns, gguf_file,
                    tensor_regex, rows_spec, **kwargs):
            from strata_bench.cases.spec import RunSpec

            request = CaseRequest(parse_shape(shape), parse_cols(cols_spec), tuple(fixture_patterns), gguf_file,
                                  tensor_regex, _rows(rows_spec))
            spec = RunSpec(make_filter(families, formats, pattern), request, str(kwargs.get("device_spec", "0")),
                           _pop_extensions(kwargs), purpose)
            return func(*args, spec=spec, **kwargs)

        for option in reversed((*_FILTER_OPTIONS, *_extension_options(), *_REQUEST_OPTIONS)):
            wrapper = option(wrapper)
        return wrapper

    return decorate


def family_format_options(func):
    """--family and --format as the run commands declare them (compile: which families, and which formats'
    sources where a family's sources are per format, as ggml's mul_mat_q instances are)."""
    for option in reversed(_FILTER_OPTIONS[:2]):
        func = option(func)
    return func


def extension_options(func):
    """Every extension's options alone (compile: no cases, only the families and variant tables), parsed into
    `extensions` (a tuple)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        extensions = _pop_extensions(kwargs)
        return func(*args, extensions=extensions, **kwargs)

    for option in reversed(_extension_options()):
        wrapper = option(wrapper)
    return wrapper


def list_option(func):
    """--list: print the selected cases, one name a line, and exit (no GPU needed)."""
    return click.option("--list", "list_only", is_flag=True,
                        help="List the selected cases and exit (no GPU needed).")(func)
