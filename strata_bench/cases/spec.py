"""One declared run: what a parity, bench, compile or kernel A/B run consists of, as one frozen record.

A RunSpec holds the case filter, the shape/column sweep and real weights (CaseRequest), the device
selection and a tuple of Extensions: the plug-ins that add families or variants to the run's own
catalog (a --cases file, TOML variants, a foreign engine's kernels). Everything that must reproduce the
run's selection (the rerun command of a failing case, the sanitize child's arguments) is `argv()` of a
RunSpec, so an option declared once is emitted once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from strata_bench.cases.case import Case, CaseFilter
from strata_bench.cases.request import CaseRequest

Catalog = dict  # name -> Family: a run's own copy of the registry (runs/catalog.py)


@runtime_checkable
class Extension(Protocol):
    """A plug-in of a run. Its class declares its CLI options (`options`: click decorators, applied once
    by cli/options.py) and `from_params(params)` (its own options' values -> an instance, or None when
    none was given); an instance says what it adds and how to ask for it again."""

    options: ClassVar[tuple[Any, ...]]
    order: ClassVar[int]  # attach order: families first (a --cases file), then variants

    @property
    def adds_variants(self) -> bool:
        """True when it puts variants into existing families' tables (--list then names each case's)."""

    def check(self, spec: "RunSpec") -> None:
        """InputError for a value that cannot work with the rest of the run, before anything is built."""

    def attach(self, catalog: Catalog, spec: "RunSpec") -> None:
        """Add its families or variants to the run's catalog (never to the global registry)."""

    def argv(self) -> list[str]:
        """Its options as a command line gives them."""

    def provenance(self) -> dict[str, Any]:
        """What a results file records of it."""


@dataclass(frozen=True)
class RunSpec:
    """A run's selection: filter, sweep and real weights, devices, extensions, and which case list
    (`purpose`: the families' default cases for parity, their bench cases for bench and A/B)."""

    filter: CaseFilter = field(default_factory=CaseFilter)
    request: CaseRequest = field(default_factory=CaseRequest)
    device: str = "0"
    extensions: tuple[Extension, ...] = ()
    purpose: str = "parity"

    @property
    def adds_variants(self) -> bool:
        return any(ext.adds_variants for ext in self.extensions)

    def check(self) -> None:
        self.request.check()
        for ext in self.extensions:
            ext.check(self)

    def argv(self) -> list[str]:
        """The options that select this run's cases, in the order a user would write them."""
        words = _filter_words(self.filter)
        for ext in sorted(self.extensions, key=lambda e: e.order):
            words += ext.argv()
        words += self.request.argv()
        if self.device != "0":
            words += ["--device", self.device]
        return words

    def provenance(self) -> dict[str, Any]:
        """What a results file records of the run's declaration: its selecting options and each extension's
        own record (`foreign_variants` there names variants that are another engine's, not this project's)."""
        return {"argv": self.argv(), "extensions": {type(ext).__name__: ext.provenance() for ext in self.extensions}}

    def narrowed(self, case: Case, device: int | None = None) -> "RunSpec":
        """The spec that selects `case` alone: its family and format, a -k pattern anchored on its name,
        the columns narrowed to its own, on `device` (default: this spec's)."""
        flt = CaseFilter((case.family,), (case.fmt,), _pattern(case, self.request))
        return replace(self, filter=flt, request=self.request.narrowed(case),
                       device=self.device if device is None else str(device))


def _filter_words(flt: CaseFilter) -> list[str]:
    words: list[str] = []
    if flt.families:
        words += ["--family", ",".join(flt.families)]
    if flt.formats:
        words += ["--format", ",".join(flt.formats)]
    if flt.pattern is not None:
        words += ["-k", flt.pattern]
    return words


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


def _pattern(case: Case, request: CaseRequest) -> str:
    # Real weights' cases are made first and filtered by -k after, so their names are matched as they are.
    if request.real_weights or (request.shape is None and request.cols is None):
        return exact_name_pattern(case.name)
    return swept_name_pattern(case, request.shape is not None, request.cols is not None)
