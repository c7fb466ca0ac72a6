"""The sweep a command asks for with --shape and --cols: each selected case with its shape replaced and
its column count set to each value, every resulting case once (bench, ab and parity all sweep alike)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

from strata_bench.cases.case import Case


def sweep(case: Case, shape: tuple[int, int] | None, cols: tuple[int, ...] | None) -> list[Case]:
    """The bench sweep of one case: its shape replaced by --shape, its column count by each of --cols."""
    base = replace(case, rows=shape[0], cols=shape[1]) if shape else case
    return [replace(base, ncols=n) for n in cols] if cols else [base]


def sweep_cases(cases: Iterable[Case], shape: tuple[int, int] | None, cols: tuple[int, ...] | None,
                families: Mapping[str, Any] | None = None) -> list[Case]:
    """Every case's sweep, in order, each resulting name once: cases that differ only in shape or columns
    collapse into one when --shape or --cols replaces what told them apart, with the variants of them all
    that run the new shape (`families` given: a variant that applies only to some column counts, as
    ggml's up to 8, joins or leaves the case by its new count, not its old one)."""
    by_name: dict[str, Case] = {}
    for case in (c for case in cases for c in sweep(case, shape, cols)):
        held = by_name.get(case.name)
        by_name[case.name] = case if held is None else replace(
            held, variants=tuple(dict.fromkeys(held.variants + case.variants)))
    if families is None or (shape is None and cols is None):
        return list(by_name.values())
    return [_runnable(families[c.family], c) for c in by_name.values()]


def _runnable(family: Any, case: Case) -> Case:
    if not family.variants:
        return case
    return replace(case, variants=tuple(n for n in case.variants if family.runs(family.variant(n), case)))
