"""A run made ready: its spec checked, its own catalog of families built (runs/catalog.py), its cases
selected. The one entry point of parity, bench, compile, kernel A/B and the sanitize child."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from strata_bench.cases import Case
from strata_bench.cases.request import request_cases
from strata_bench.cases.spec import RunSpec
from strata_bench.errors import InputError
from strata_bench.runs.catalog import build_catalog


@dataclass(frozen=True)
class Prepared:
    """A run ready to start: its own catalog of families and the cases it selected from it."""

    spec: RunSpec
    catalog: dict[str, Any]
    cases: list[Case]


def prepare(spec: RunSpec) -> Prepared:
    """The one entry point of parity, bench, compile, kernel A/B and the sanitize child: check the spec,
    build the run's catalog (runs/catalog.py) and select its cases (the families' defaults swept by
    --shape/--cols, or real weights: cases/request.py)."""
    spec.check()
    catalog = build_catalog(spec)
    return Prepared(spec, catalog, request_cases(spec.filter, spec.request, catalog, spec.purpose))


def select_families(catalog: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The catalog's families named (every one where none is), for a command with no cases (compile)."""
    unknown = [n for n in names if n not in catalog]
    if unknown:
        raise InputError(f"unknown family {unknown[0]!r}; families: {', '.join(sorted(catalog)) or '(none)'}")
    chosen = {n: catalog[n] for n in (names or sorted(catalog))}
    if not chosen:
        raise InputError("no kernel family is registered (strata_bench/families is empty and no --cases given)")
    return chosen
