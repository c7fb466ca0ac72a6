"""The sweep a command asks for with --shape and --cols: each selected case with its shape replaced and
its column count set to each value, every resulting case once (bench, ab and parity all sweep alike)."""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from strata_bench.cases.case import Case


def sweep(case: Case, shape: tuple[int, int] | None, cols: tuple[int, ...] | None) -> list[Case]:
    """The bench sweep of one case: its shape replaced by --shape, its column count by each of --cols."""
    base = replace(case, rows=shape[0], cols=shape[1]) if shape else case
    return [replace(base, ncols=n) for n in cols] if cols else [base]


def sweep_cases(cases: Iterable[Case], shape: tuple[int, int] | None, cols: tuple[int, ...] | None) -> list[Case]:
    """Every case's sweep, in order, each resulting case once (cases that differ only in shape or
    columns collapse into one when --shape or --cols replaces what told them apart)."""
    return list(dict.fromkeys(c for case in cases for c in sweep(case, shape, cols)))
