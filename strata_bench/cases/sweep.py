"""The sweep a command asks for with --shape and --cols: each selected case with its shape replaced and
its column count set to each value, every resulting case once (bench, ab and parity all sweep alike).

A fixture case's data are real rows of a fixed shape: --shape cannot relabel them (the run would read a
fixture of 64x1536 as 2560x12288 and stop), so a --shape sweep leaves fixture cases out, in one line."""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping

from strata_bench.cases.case import Case
from strata_bench.errors import InputError


def sweep(case: Case, shape: tuple[int, int] | None, cols: tuple[int, ...] | None) -> list[Case]:
    """The bench sweep of one case: its shape replaced by --shape, its column count by each of --cols."""
    base = replace(case, rows=shape[0], cols=shape[1]) if shape else case
    return [replace(base, ncols=n) for n in cols] if cols else [base]


def sweep_cases(cases: Iterable[Case], shape: tuple[int, int] | None, cols: tuple[int, ...] | None,
                families: Mapping[str, Any] | None = None, note: Callable[[str], None] | None = None) -> list[Case]:
    """Every case's sweep, in order, each resulting name once: cases that differ only in shape or columns
    collapse into one when --shape or --cols replaces what told them apart, with the variants of them all
    that run the new shape (`families` given: a variant that applies only to some column counts, as
    ggml's up to 8, joins or leaves the case by its new count, not its old one). With --shape, the fixture
    cases are left out and counted in one line on `note` (stderr by default)."""
    cases = list(cases)
    if shape:
        cases = _shapeable(cases, shape, cols, note or (lambda line: print(line, file=sys.stderr)))
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


def _shapeable(cases: list[Case], shape: tuple[int, int], cols: tuple[int, ...] | None,
               note: Callable[[str], None]) -> list[Case]:
    """The cases whose data can take `shape` (all but the fixtures'); InputError when none can."""
    fixed = [c for c in cases if c.data.startswith("fixture:")]
    if not fixed:
        return cases
    option = f"--shape {shape[0]}x{shape[1]}"
    if len(fixed) == len(cases):
        raise InputError(f"{option}: every selected case is on a fixture's real weights, whose shape is their "
                         f"own; leave out --shape (--cols alone sweeps them)")
    left_out = len(sweep_cases(fixed, None, cols))  # as many as the sweep would have listed
    plural = "s" if left_out != 1 else ""
    note(f"{option}: {left_out} fixture case{plural} left out (real weights keep their own shape: --fixtures "
         f"with --cols runs them)")
    return [c for c in cases if not c.data.startswith("fixture:")]
