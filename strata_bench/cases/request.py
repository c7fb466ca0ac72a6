"""What a command asks for beyond the filters: a shape and column sweep (--shape, --cols), real weights
(--fixtures, --gguf/--tensor/--rows) and kernel variants declared in TOML (--variants). One record,
one function turning it into cases, shared by parity, bench and ab."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from strata_bench.cases.case import Case, CaseFilter
from strata_bench.errors import InputError

GGML_MAX_COLUMNS = 8  # ggml's MMVQ_MAX_BATCH_SIZE

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
    variants: tuple[str, ...] = ()  # --variants FILE.toml
    ggml: str | None = None  # --ggml PATH: a ggml tree whose kernels join as variant `ggml`
    ggml_b: str | None = None  # --ggml-b PATH: a second tree (a branch), variant `ggml_b`, held to ggml's bits

    @property
    def adds_variants(self) -> bool:
        """True when variants join the families' tables (--variants, --ggml): --list then shows each case's."""
        return bool(self.variants or self.ggml)

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
        if self.ggml_b is not None and self.ggml is None:
            raise InputError(f"--ggml-b {self.ggml_b} needs --ggml PATH, the tree it is held to")
        if self.ggml is not None and self.cols and max(self.cols) > GGML_MAX_COLUMNS:
            raise InputError(f"--cols {max(self.cols)}: ggml's mul_mat_vec_q takes 1 to {GGML_MAX_COLUMNS} columns "
                             f"(MMVQ_MAX_BATCH_SIZE; above it ggml uses another kernel)")
        if self.shape is not None and self.real_weights:
            raise InputError("--shape replaces a case's rows and inputs; real weights (--fixtures, --gguf) bring "
                             "their own: use --cols alone with them")


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
    return sweep_cases(cases, request.shape, request.cols)
