"""Parity: the checks of one case. Every variant runs over two poisons (an unwritten element fails); every
output is checked finite, compared byte for byte with the baseline's (diagnosed where it differs),
each column of a multi-column call with the 1-column call, and each float64 reference within its
tolerance; where the family requires it, the variants' max |err| must be equal.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from strata_bench.cases import Case, Expected, Family
from strata_bench.checks.diagnosis import as_uint, diagnose
from strata_bench.checks.outcome import CaseResult, CheckResult, Status
from strata_bench.runner.launch import VariantRun, run_variant


def _written_checks(family: Family, case: Case, run: VariantRun) -> list[CheckResult]:
    out = []
    for name, unwritten in run.unwritten.items():
        mask = family.written_mask(case, name)
        must = np.ones_like(unwritten) if mask is None else np.asarray(mask, dtype=bool)
        missing = int((unwritten & must).sum())
        stray = int((~unwritten & ~must).sum())
        ok = missing == 0 and stray == 0
        detail = "" if ok else f"{name}: {missing} elements not written, {stray} written outside the output"
        if missing:
            idx = np.unravel_index(int(np.flatnonzero(unwritten & must)[0]), unwritten.shape)
            detail += f" (first unwritten {family.describe_index(case, name, tuple(int(i) for i in idx))})"
        out.append(CheckResult("written", run.variant, ok, detail))
    return out


def _finite_checks(family: Family, case: Case, run: VariantRun) -> list[CheckResult]:
    out = []
    for name, arr in run.outputs.items():
        if arr.dtype.kind != "f" or family.allows_nonfinite(case, name):
            continue
        mask = family.written_mask(case, name)
        vals = arr if mask is None else arr[np.asarray(mask, dtype=bool)]
        bad = int((~np.isfinite(vals)).sum())
        out.append(CheckResult("finite", run.variant, bad == 0, f"{name}: {bad} non-finite elements" if bad else ""))
    return out


def _bitwise_checks(family: Family, case: Case, runs: Mapping[str, VariantRun]) -> list[CheckResult]:
    names = family.compared_outputs(case)
    base = runs[case.baseline]
    out = []
    for variant in case.variants[1:]:
        for name in (base.outputs if names is None else names):
            a, b = base.outputs[name], runs[variant].outputs[name]
            if a.shape != b.shape or a.dtype != b.dtype:
                out.append(CheckResult("bitwise", variant, False, f"{name}: shape/dtype {b.shape} {b.dtype} "
                                                                     f"!= {a.shape} {a.dtype}"))
            elif np.array_equal(as_uint(a), as_uint(b)):
                out.append(CheckResult("bitwise", variant, True))
            else:
                out.append(CheckResult("bitwise", variant, False,
                                       diagnose(family, case, name, a, b, case.baseline, variant)))
    return out


def _reference_checks(family: Family, case: Case, runs: Mapping[str, VariantRun],
                      refs: Iterable[Expected]) -> list[CheckResult]:
    out = []
    for exp in refs:
        for variant, run in runs.items():
            got = np.asarray(family.output_values(case, exp.output, run.outputs), dtype=np.float64)
            ref = np.asarray(exp.ref, dtype=np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                err = np.abs(got - ref)
            finite = bool(np.isfinite(err[np.isfinite(ref)]).all())
            max_err = float(np.nanmax(np.where(np.isfinite(ref), err, 0.0))) if err.size else 0.0
            max_ref = float(np.nanmax(np.abs(np.where(np.isfinite(ref), ref, 0.0)))) if ref.size else 0.0
            denom = float(np.sum(np.where(np.isfinite(ref), ref, 0.0) ** 2))
            nmse = float(np.sum(np.where(np.isfinite(ref), err, 0.0) ** 2) / denom) if denom else 0.0
            # Non-finite references (e.g. an fp16 overflow) must be matched exactly.
            special_ok = bool(np.array_equal(got[~np.isfinite(ref)], ref[~np.isfinite(ref)], equal_nan=True))
            ok = finite and special_ok and max_err <= exp.tol
            detail = "" if ok else (f"{exp.output} vs {exp.label}: max|err| {max_err:.3e} > tol {exp.tol:.3e}"
                                    f" ({exp.why})" if finite and special_ok else
                                    f"{exp.output} vs {exp.label}: non-finite or mismatched special values")
            out.append(CheckResult("f64", variant, ok, detail, max_err, max_ref, exp.tol, nmse, exp.label))
    return out


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


@dataclass(frozen=True)
class PreparedCase:
    """Host-side work of a case, done ahead on a worker thread: inputs, references, related cases."""

    host: Mapping[str, Any]
    refs: tuple[Expected, ...]
    related: tuple[tuple[Case, str, Any, Mapping[str, Any]], ...]  # (case, output, select, its host inputs)


def prepare_case(family: Family, case: Case) -> PreparedCase:
    """Everything a case needs from the CPU (numpy releases the GIL, so several run at once)."""
    host = family.make_inputs(case)
    related = tuple((other, output, select, family.make_inputs(other))
                    for other, output, select in family.related_cases(case))
    return PreparedCase(host, tuple(family.reference(case, host)), related)


def check_case(family: Family, case: Case, kernels: Any, device: int,
               prepared: PreparedCase | None = None) -> CaseResult:
    """Run every variant of one case on the current device and check it. KernelFault propagates."""
    start = time.perf_counter()
    prepared = prepared or prepare_case(family, case)

    def run_all(c: Case, host: Mapping[str, Any]) -> dict[str, VariantRun]:
        dev = family.to_device(c, host)
        return {v: run_variant(family, c, v, kernels, dev) for v in c.variants}

    runs = run_all(case, prepared.host)
    checks: list[CheckResult] = []
    for run in runs.values():
        checks += _written_checks(family, case, run) + _finite_checks(family, case, run)
    checks += _bitwise_checks(family, case, runs)
    checks += _related_checks(family, case, runs, [(c, o, sel, run_all(c, h)) for c, o, sel, h in prepared.related])
    checks += _reference_checks(family, case, runs, prepared.refs)
    checks += _error_equal_checks(family, case, checks)
    status = Status.PASS if all(c.ok for c in checks) else Status.FAIL
    return CaseResult(case, device, status, tuple(checks), time.perf_counter() - start)
