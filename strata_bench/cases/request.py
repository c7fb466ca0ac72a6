"""What a command asks for beyond the filters and the extensions: a shape and column sweep (--shape,
--cols) and real weights (--fixtures, --gguf/--tensor/--rows). One record, one function turning it into
cases, shared by parity, bench and ab."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping

from strata_bench.cases.case import Case, CaseFilter
from strata_bench.errors import InputError

if TYPE_CHECKING:
    from strata_bench.cases.family import Family


@dataclass(frozen=True)
class CaseRequest:
    """The case options of a command, parsed (cli/options.py builds it)."""

    shape: tuple[int, int] | None = None  # --shape ROWSxCOLS
    cols: tuple[int, ...] | None = None  # --cols N[,N]
    fixtures: tuple[str, ...] = ()  # --fixtures PATTERN (globs over fixture names)
    gguf: str | None = None  # --gguf FILE
    tensor: str | None = None  # --tensor REGEX
    rows: tuple[int, int] | None = None  # --rows A:B

    @property
    def real_weights(self) -> bool:
        """True when the cases come from fixtures (named or read from a GGUF file), not the defaults."""
        return bool(self.fixtures or self.gguf)

    def check(self) -> None:
        """InputError for options that need one another or exclude one another."""
        if self.gguf is None and (self.tensor is not None or self.rows is not None):
            raise InputError(f"{'--tensor' if self.tensor is not None else '--rows'} needs --gguf FILE")
        if self.gguf is not None and not self.tensor:
            raise InputError(f"--gguf {self.gguf} needs --tensor REGEX naming the tensors to read")
        if self.shape is not None and self.real_weights:
            raise InputError("--shape replaces a case's rows and inputs; real weights (--fixtures, --gguf) bring "
                             "their own: use --cols alone with them")


    def argv(self) -> list[str]:
        """The options as a command line gives them (cli/options.py parses them back into this record)."""
        words = [] if self.shape is None else ["--shape", f"{self.shape[0]}x{self.shape[1]}"]
        words += [w for pattern in self.fixtures for w in ("--fixtures", pattern)]
        words += [] if self.gguf is None else ["--gguf", self.gguf]
        words += [] if self.tensor is None else ["--tensor", self.tensor]
        words += [] if self.rows is None else ["--rows", f"{self.rows[0]}:{self.rows[1]}"]
        return words + ([] if self.cols is None else ["--cols", ",".join(str(n) for n in self.cols)])

    def narrowed(self, case: Case) -> "CaseRequest":
        """The request that makes `case` alone once -k has picked its default: a sweep's --cols narrowed to
        the case's own count (else each selected default becomes one case per count). Real weights are kept
        as given: a family may make a fixture's cases from --cols in its own way (pfgemm's entries do not
        follow it), and their cases are filtered by -k after they are made."""
        if self.real_weights or self.cols is None:
            return self
        return replace(self, cols=(case.ncols,))


def check_shape_fits(case: Case, shape: tuple[int, int]) -> None:
    """InputError naming the format and the shape when a row of the shape is not whole blocks of the
    case's format (only formats the registry knows: f32 inputs have no block)."""
    from strata_bench.formats import all_formats

    fmt = all_formats().get(case.fmt)
    if fmt is not None and shape[1] % fmt.block_size:
        raise InputError(f"--shape {shape[0]}x{shape[1]}: {case.fmt} takes rows of a multiple of {fmt.block_size} "
                         f"inputs, {shape[1]} is not (family {case.family})")


def request_cases(flt: CaseFilter, request: CaseRequest, families: Mapping[str, "Family"],
                  purpose: str = "parity") -> list[Case]:
    """The cases a command runs: the families' defaults swept by --shape/--cols, or, with real weights,
    every selected family's cases over each fixture (cases/fixtures.py)."""
    from strata_bench.cases.registry import select_cases
    from strata_bench.cases.sweep import sweep_cases

    request.check()
    if request.real_weights:
        from strata_bench.cases.fixtures import fixture_request_cases

        return fixture_request_cases(flt, request, families)
    cases = select_cases(flt, families, purpose=purpose)
    if request.shape is not None:
        for case in cases:
            check_shape_fits(case, request.shape)
    return sweep_cases(cases, request.shape, request.cols, families)
