"""The one command line that reruns a case alone, for a failure's report: the case's family and format, a
-k pattern that selects it and no other case, and the options that made it (a case file and its kernels,
TOML variants, a --shape/--cols sweep, real weights) and the device it ran on, each word shell-quoted."""
from __future__ import annotations

import re
import shlex

from strata_bench.cases.case import Case
from strata_bench.cases.request import CaseRequest

PROGRAM = "strata-bench"


def exact_name_pattern(name: str) -> str:
    """A -k REGEX that selects the case named `name` and no other (-k is re.search, so it is anchored)."""
    return "^" + re.escape(name) + "$"


def swept_name_pattern(case: Case, shape_swept: bool, cols_swept: bool) -> str:
    """A -k REGEX for a case that a --shape/--cols sweep made. -k selects the default cases before the
    sweep replaces their shape (--shape) and column count (--cols), so those parts of the name match any
    value; the sweep then makes every selected case into this one. Mirrors Case.name."""
    shape = r"\d+x\d+" if shape_swept else re.escape(f"{case.rows}x{case.cols}")
    ncols = r"n\d+" if cols_swept else re.escape(f"n{case.ncols}")
    head = f"{case.family}/{case.fmt}/"
    tail = case.name[len(f"{head}{case.rows}x{case.cols}/n{case.ncols}/"):]  # the data source and the params
    return f"^{re.escape(head)}{shape}/{ncols}/{re.escape(tail)}$"


def rerun_command(case: Case, request: CaseRequest | None = None, device: int = 0, cases_file: str | None = None,
                  kernels_dir: str | None = None, command: str = "parity") -> str:
    """`strata-bench parity --family F --format T -k '^name$' ...`: the command that runs `case` alone,
    selected by the same options that selected it (`request`, `cases_file`, `kernels_dir`) on `device`."""
    request = request or CaseRequest()
    words = [PROGRAM, command, "--family", case.family, "--format", case.fmt, "-k", _pattern(case, request)]
    words += _paired("--cases", cases_file) + _paired("--kernels", kernels_dir)
    words += [w for path in request.variants for w in ("--variants", path)]
    words += _real_weight_words(request) if request.real_weights else _sweep_words(case, request)
    if device != 0:
        words += ["--device", str(device)]
    return shlex.join(words)


def _pattern(case: Case, request: CaseRequest) -> str:
    # Real weights' cases are made first and filtered by -k after, so their names are matched as they are.
    if request.real_weights or (request.shape is None and request.cols is None):
        return exact_name_pattern(case.name)
    return swept_name_pattern(case, request.shape is not None, request.cols is not None)


def _sweep_words(case: Case, request: CaseRequest) -> list[str]:
    """--shape as given, and --cols narrowed to the case's own column count (the sweep would otherwise
    make the selected defaults into one case per column count)."""
    words = [] if request.shape is None else ["--shape", f"{request.shape[0]}x{request.shape[1]}"]
    return words + ([] if request.cols is None else ["--cols", str(case.ncols)])


def _real_weight_words(request: CaseRequest) -> list[str]:
    """The real-weight options as given: a family may make a fixture's cases from --cols in its own way
    (pfgemm's entries do not follow it), so they are not narrowed."""
    words = [w for pattern in request.fixtures for w in ("--fixtures", pattern)]
    words += _paired("--gguf", request.gguf) + _paired("--tensor", request.tensor)
    if request.rows is not None:
        words += ["--rows", f"{request.rows[0]}:{request.rows[1]}"]
    if request.cols is not None:
        words += ["--cols", ",".join(str(n) for n in request.cols)]
    return words


def _paired(option: str, value: str | None) -> list[str]:
    return [] if value is None else [option, value]
