"""Parity: the checks of one case. Every variant runs over two poisons (an unwritten element fails); every
output is checked finite, compared byte for byte with the baseline's (diagnosed where it differs),
each column of a multi-column call with the 1-column call, and each float64 reference within its
tolerance, element by element (one bound for every element, or each element's own); where the family
requires it, the variants' max |err| must be equal.
"""
from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from strata_bench.cases import Case, Expected, Family
from strata_bench.checks.diagnosis import as_uint, diagnose
from strata_bench.checks.outcome import CaseResult, CheckResult, CaseStatus
from strata_bench.checks.phases import PhaseTimes, maybe
from strata_bench.checks import f64, pieces
from strata_bench.checks.ahead import Ahead
from strata_bench.checks.refcache import computed_references
from strata_bench.checks.refstats import RefStats
from strata_bench.errors import InputError
from strata_bench.gpu.launch import VariantRun, run_variant

# Elements per piece where bits are compared a piece at a time: a piece's temporaries stay in a core's
# cache, no array of the whole size is made and faulted in, and the first differing piece ends it.
PIECE = pieces.PIECE


def omitted_outputs(family: Family, variant: str) -> tuple[str, ...]:
    """The outputs `variant` does not compute (Variant.omits); none for a stand-in family without a table."""
    omitted = getattr(family, "omitted", None)
    return omitted(variant) if omitted is not None else ()


def _computed(family: Family, run: VariantRun) -> VariantRun:
    """`run` without the outputs its variant does not compute (Variant.omits): no check reads those."""
    omitted = omitted_outputs(family, run.variant)
    if not omitted:
        return run
    return VariantRun(run.variant, {k: v for k, v in run.outputs.items() if k not in omitted},
                      {k: v for k, v in run.unwritten.items() if k not in omitted})


def _written_checks(family: Family, case: Case, run: VariantRun) -> list[CheckResult]:
    out = []
    for name, unwritten in run.unwritten.items():
        mask = family.written_mask(case, name)
        must = None if mask is None else np.asarray(mask, dtype=bool)
        # No mask: every element must be written, so none is stray (the same counts as an all-True mask).
        missing = int(np.count_nonzero(unwritten)) if must is None else int(np.count_nonzero(unwritten & must))
        stray = 0 if must is None else int(np.count_nonzero(~unwritten & ~must))
        ok = missing == 0 and stray == 0
        detail = "" if ok else f"{name}: {missing} elements not written, {stray} written outside the output"
        if missing:
            idx = np.unravel_index(int(np.flatnonzero(unwritten if must is None else unwritten & must)[0]),
                                   unwritten.shape)
            detail += f" (first unwritten {family.describe_index(case, name, tuple(int(i) for i in idx))})"
        out.append(CheckResult("written", run.variant, ok, detail))
    return out


def _finite_checks(family: Family, case: Case, runs: Mapping[str, VariantRun],
                   bits: Mapping[str, Mapping[str, str]]) -> dict[str, list[CheckResult]]:
    """Each variant's finite checks, made once per output and bit class (`bits`, _bit_classes)."""
    made: dict[tuple[str, str], CheckResult] = {}
    out: dict[str, list[CheckResult]] = {}
    for variant, run in runs.items():
        out[variant] = []
        for name, arr in run.outputs.items():
            if arr.dtype.kind != "f" or family.allows_nonfinite(case, name):
                continue
            key = (name, bits[name][variant])
            if key not in made:
                made[key] = _finite_check(family, case, name, arr)
            out[variant].append(replace(made[key], variant=variant))
    return out


def _finite_check(family: Family, case: Case, name: str, arr: np.ndarray) -> CheckResult:
    mask = family.written_mask(case, name)
    vals = arr if mask is None else arr[np.asarray(mask, dtype=bool)]
    bad = vals.size - int(np.count_nonzero(np.isfinite(vals)))
    return CheckResult("finite", "", bad == 0, f"{name}: {bad} non-finite elements" if bad else "")


def _bit_classes(runs: Mapping[str, VariantRun]) -> dict[str, dict[str, str]]:
    """Per output, each variant's class: the first variant (in run order) whose output has the same bits
    (shape, dtype and bytes). Made once per case: a check of an output's values (finite, bitwise, a float64
    reference) depends on its bits alone, so it is made once per class and its result given to the others."""
    classes: dict[str, dict[str, str]] = {}
    for variant, run in runs.items():
        for name, arr in run.outputs.items():
            firsts = classes.setdefault(name, {})
            firsts[variant] = next((first for first in dict.fromkeys(firsts.values())
                                    if _same_bits(runs[first].outputs[name], arr)), variant)
    return classes


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bytes; compared a piece at a time (no comparison array of a's size to fault
    in, and the first differing piece ends it)."""
    if a is b:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    x, y = as_uint(a).reshape(-1), as_uint(b).reshape(-1)
    return all(np.array_equal(x[i:i + PIECE], y[i:i + PIECE]) for i in range(0, x.size, PIECE))


def _error_model(family: Family, case: Case, variant: str) -> Any:
    """The variant's error model where it judges this case's format (toml_abi/error_model.py), else None."""
    lookup = getattr(family, "variant", None)  # a stand-in family may have no table
    try:
        model = None if lookup is None else getattr(lookup(variant), "error_model", None)
    except InputError:  # a family without a table (its own launch)
        return None
    return model if model is not None and model.applies(case.fmt) else None


def _bitwise_checks(family: Family, case: Case, runs: Mapping[str, VariantRun],
                    bits: Mapping[str, Mapping[str, str]] | None = None) -> list[CheckResult]:
    """Each variant's outputs against its bitwise target's (`bits`: the runs' _bit_classes, made here
    when not given)."""
    bits = _bit_classes(runs) if bits is None else bits
    out = []
    for variant in case.variants[1:]:
        against = _bitwise_against(family, case, variant, runs)
        base = runs[against]
        names = compared_names(family, case, variant, against)
        # Held to another variant's bits (ggml_b to ggml's): bitwise whatever its error model.
        model = _error_model(family, case, variant) if against == case.baseline else None
        for name in (base.outputs if names is None else names):
            if name not in runs[variant].outputs or name not in base.outputs:
                continue  # one of the two does not compute it (Variant.omits)
            a, b = base.outputs[name], runs[variant].outputs[name]
            same = bits[name][variant] == bits[name][against]
            if model is not None:
                # Not required: its error model judges it (err-model); said where it differs.
                out.append(CheckResult("bitwise", variant, True, "" if same else
                                       f"{name}: not bitwise equal to {case.baseline} (judged by its error model)"))
            elif same:
                out.append(CheckResult("bitwise", variant, True))
            elif a.shape != b.shape or a.dtype != b.dtype:
                out.append(CheckResult("bitwise", variant, False, f"{name}: shape/dtype {b.shape} {b.dtype} "
                                                                     f"!= {a.shape} {a.dtype}"))
            else:
                out.append(CheckResult("bitwise", variant, False,
                                       diagnose(family, case, name, a, b, against, variant)))
    return out


def bitwise_target(family: Family, case: Case, variant: str, ran: Iterable[str]) -> str | None:
    """The variant whose bits `variant` must have in `case` (`ran`: the variants run), or None where its
    error model judges it instead (bench's check step asks the same question parity does)."""
    against = _bitwise_against(family, case, variant, tuple(ran))
    if against == case.baseline and _error_model(family, case, variant) is not None:
        return None
    return against


def _bitwise_against(family: Family, case: Case, variant: str, runs: Collection[str]) -> str:
    """The variant whose bits `variant` must have: its Variant.same_as where the case runs that one, else
    the case's baseline."""
    same_as = _same_as(family, variant)
    return same_as if same_as in runs else case.baseline


def compared_names(family: Family, case: Case, variant: str, against: str) -> tuple[str, ...] | None:
    """The outputs `variant` must equal `against` in, bit for bit (None: all): every one where it is held to
    that variant's bits (Variant.same_as: an engine's branch against the engine, whatever the family compares
    between its own variants), else the family's choice (compared_outputs)."""
    return None if _same_as(family, variant) == against else family.compared_outputs(case)


def _same_as(family: Family, variant: str) -> str | None:
    try:
        return getattr(family.variant(variant), "same_as", None)
    except (InputError, AttributeError):  # a family without a table
        return None


def _reference_checks(family: Family, case: Case, runs: Mapping[str, VariantRun], refs: Iterable[Expected],
                      host: Mapping[str, Any] | None = None,
                      bits: Mapping[str, Mapping[str, str]] | None = None,
                      known: Sequence[RefStats | None] = ()) -> list[CheckResult]:
    """Each variant's values against each float64 reference. The reference's own statistics are read
    from `known` (per reference, in order: its cache entry's; None or missing: computed once here);
    variants whose outputs have the same bits (one class in `bits`, the runs' _bit_classes, made here when
    not given) share their values and their checks (the same inputs give the same results), so
    bitwise-equal variants cost one comparison. A variant judged by its error model (cases/error_model.py)
    is checked element by element against the model's bounds instead, an err-model check with its
    max|err| over the baseline's."""
    bits = _bit_classes(runs) if bits is None else bits
    out = []
    values: dict[tuple[tuple[str | None, ...], str], np.ndarray] = {}
    for i, exp in enumerate(refs):
        stats = f64.Reference(exp, known[i] if i < len(known) else None)
        made: dict[tuple[str | None, ...], CheckResult] = {}
        base_err = None
        describe = partial(_describe, family, case, exp.output)
        for variant, run in runs.items():
            if exp.output in omitted_outputs(family, variant):
                continue
            # Its class over every output (None where it computes none: Variant.omits): values may read several.
            klass = tuple(firsts.get(variant) for firsts in bits.values())
            if (klass, exp.output) not in values:
                values[klass, exp.output] = _values(family, case, exp.output, run.outputs)
            got = values[klass, exp.output]
            model = _judging_model(family, case, variant)
            if model is not None:  # its own bounds, element by element (never shared with others)
                out.append(_model_check(model, case, host or {}, exp, variant, got, describe, base_err))
                continue
            if klass not in made:
                made[klass] = f64.check(exp, stats, variant, got, describe)
            out.append(replace(made[klass], variant=variant))
            if case.baseline == variant:
                base_err = made[klass].max_err
    return out


def _values(family: Family, case: Case, name: str, outputs: Mapping[str, Any]) -> np.ndarray:
    """The values an Expected named `name` is checked against (family.output_values): a bool, integer or
    float array of 8 bytes an element at most as it is (the check's pieces widen it to float64 as they
    read it: the same values as a float64 copy, without one of the whole size), anything else widened
    here."""
    got = np.asarray(family.output_values(case, name, outputs))
    return got if got.dtype.kind in "biuf" and got.dtype.itemsize <= 8 else got.astype(np.float64)


def _judging_model(family: Family, case: Case, variant: str) -> Any:
    """The error model that judges `variant` in `case`: its own where it applies to the format, and, for
    the baseline (whose error the others' are set against), only a model that may judge a baseline."""
    model = _error_model(family, case, variant)
    if model is not None and case.baseline == variant and not model.judges_baseline:
        return None
    return model


def _model_check(model: Any, case: Case, host: Mapping[str, Any], exp: Expected, variant: str, got: np.ndarray,
                 describe: Callable[[tuple[int, ...]], str], base_err: float | None) -> CheckResult:
    why = f"error model: {model.describe()}" + ("" if base_err is None else f"; the baseline's max|err| {base_err:.3e}")
    own = replace(exp, tol=model.bounds(case, host, exp, base_err), why=why)
    check = f64.check(own, f64.Reference(own), variant, got, describe)
    ratio = f64.ratio(check.max_err, base_err) if base_err is not None and check.max_err is not None else None
    return replace(check, check="err-model", baseline_ratio=ratio)


def error_model_notes(catalog: Mapping[str, Family], cases: Iterable[Case]) -> list[str]:
    """What each error model that judges some of `cases` says every report must carry (its `note`: a
    documented difference the check allows, as ggml's q4_0 zero sign), once each, in first-use order."""
    notes = (getattr(_error_model(catalog[c.family], c, v), "note", None) for c in cases for v in c.variants)
    return list(dict.fromkeys(n for n in notes if n))


def _describe(family: Family, case: Case, output: str, index: tuple[int, ...]) -> str:
    """The family's name for an element (describe_index), or 'index i,j' where the family's naming does
    not fit this output (describe_index was written for the outputs its diagnoses name, and an f64 check
    names an element of every reference, passing or not: a naming slip must not fail the run)."""
    try:
        return family.describe_index(case, output, index)
    except (ValueError, TypeError, IndexError, KeyError):
        return "index " + ",".join(str(i) for i in index)


def _error_equal_checks(family: Family, case: Case, checks: list[CheckResult]) -> list[CheckResult]:
    """Report (and, where the family requires it, enforce) equal max|err| across variants per reference."""
    out = []
    for label in dict.fromkeys(c.label for c in checks if c.check == "f64"):
        errs = {c.variant: c.max_err for c in checks if c.check == "f64" and c.label == label}
        equal = len(set(errs.values())) == 1
        required = family.errors_must_match(case)
        out.append(CheckResult("err-equal", ",".join(errs), equal or not required,
                               "" if equal else f"{label}: max|err| differ: " +
                               ", ".join(f"{v}={e:.6e}" for v, e in errs.items()), label=label))
    return out


def _related_checks(family: Family, case: Case, runs: Mapping[str, VariantRun],
                    related: list[tuple[Case, str, Any, Mapping[str, VariantRun]]]) -> list[CheckResult]:
    out = []
    for other_case, output, select, other_runs in related:
        for variant in case.variants:
            if _error_model(family, case, variant) is not None:
                continue  # an engine's kernel may change its template with the column count
            mine = np.ascontiguousarray(select(runs[variant].outputs))
            theirs = other_runs[variant].outputs[output]
            if mine.shape == theirs.shape and np.array_equal(as_uint(mine), as_uint(theirs)):
                out.append(CheckResult("columns", variant, True))
            else:
                detail = (f"vs {other_case.name}: shape {mine.shape} != {theirs.shape}" if mine.shape != theirs.shape
                          else "vs " + other_case.name + ": " +
                          diagnose(family, other_case, output, theirs, mine, "1-col", f"{case.ncols}-col"))
                out.append(CheckResult("columns", variant, False, detail))
    return out


def check_case(family: Family, case: Case, kernels: Any, device: int, times: PhaseTimes | None = None,
               shared_runs: dict | None = None, ahead: Ahead | None = None,
               on_failure: Callable[[CaseResult, Mapping[str, Any], Mapping[str, VariantRun], tuple[Expected, ...]],
                                    Any] | None = None) -> CaseResult:
    """Run every variant of one case on the current device and check it. KernelFault propagates.

    `times` (optional) accumulates seconds per phase (where a case was made ahead, the inputs phase is
    the loop's wait for it: its inputs and cache lookup, made together); `shared_runs` (optional, kept
    by CaseChecker for a whole loop) holds the runs of related cases already made on this device, so a
    1-column call that several N-column cases compare with runs once; `ahead` (optional, an
    ahead.Ahead) makes the case's inputs and finds its cached references, maybe ahead of the loop (and
    waits for its reference pool where an entry is missing); `on_failure` (optional, e.g. a
    dump.FailureDump) is given a failed case's result, host inputs, runs and references while they are
    at hand."""
    start = time.perf_counter()

    def run_all(c: Case, host: Mapping[str, Any]) -> dict[str, VariantRun]:
        with maybe(times, "launches"):
            dev = family.device_inputs(c, host)
            return {v: _computed(family, run_variant(family, c, v, kernels, dev)) for v in c.variants}

    def related_runs(c: Case) -> Mapping[str, VariantRun]:
        key = (device, c)
        if shared_runs is not None and key in shared_runs:
            return shared_runs[key]
        with maybe(times, "inputs"):
            host = family.make_inputs(c)
        runs = run_all(c, host)
        if shared_runs is not None:
            shared_runs[key] = runs
        return runs

    with maybe(times, "inputs"):
        side = (ahead or Ahead()).take(family, case)
        host, related = side.inputs.result()
    with maybe(times, "references"):
        found = side.lookup.result()
        refs = computed_references(family, case, host, found)
        known = found.stats if refs is found.refs else ()  # a hit's statistics, read with it
    runs = run_all(case, host)
    related_done = [(c, o, sel, related_runs(c)) for c, o, sel in related]
    with maybe(times, "comparisons"):
        bits = _bit_classes(runs)
        finite = _finite_checks(family, case, runs, bits)
        checks: list[CheckResult] = []
        for variant, run in runs.items():
            checks += _written_checks(family, case, run) + finite[variant]
        checks += _bitwise_checks(family, case, runs, bits)
        checks += _related_checks(family, case, runs, related_done)
        checks += _reference_checks(family, case, runs, refs, host, bits, known)
        checks += _error_equal_checks(family, case, checks)
    status = CaseStatus.PASS if all(c.ok for c in checks) else CaseStatus.FAIL
    result = CaseResult(case, device, status, tuple(checks), time.perf_counter() - start)
    if status is CaseStatus.FAIL and on_failure is not None:
        on_failure(result, host, runs, tuple(refs))
    return result


class CaseChecker:
    """check_case for a whole loop: keeps the related cases' runs (per device) and, optionally, the
    seconds per phase, an ahead.Ahead making the cases' host side ahead of the loop (with the
    refpool.ReferencePool filling the reference cache) and what to do with a failed case's arrays
    (`on_failure`, as check_case takes it). Call it as run_on_devices' per_case."""

    def __init__(self, times: PhaseTimes | None = None, share_runs: bool = True, ahead: Ahead | None = None,
                 on_failure: Callable[..., Any] | None = None):
        self.times = times
        self.shared_runs: dict | None = {} if share_runs else None
        self.ahead = ahead
        self.on_failure = on_failure

    def __call__(self, family: Family, case: Case, kernels: Any, device: int) -> CaseResult:
        return check_case(family, case, kernels, device, self.times, self.shared_runs, self.ahead, self.on_failure)
