"""checks/parity.py: an error model that gives a tolerance (ggml/error.py) holds each output of its variant
to its own bound, not the case's max|err| to the largest bound; the baseline keeps the family's."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from strata_bench.cases import Expected, Variant
from strata_bench.checks.parity import _reference_checks
from strata_bench.gpu.launch import VariantRun

REF = np.array([1.0, 100.0], np.float64)
FAMILY_TOL = np.array([1e-3, 1e-3])


class _PerOutput:
    """Adds 1e-3 to output 0's bound and 1.0 to output 1's."""

    judges_baseline = True

    def applies(self, fmt):
        return True

    def bounds(self, case, host, exp, baseline_err):
        return np.asarray(exp.tol) + np.array([1e-3, 1.0])

    def describe(self):
        return "per output"


def _checks(toy_family, toy_case, got):
    none = (lambda f, s: [], lambda *a: None)
    toy_family.variants = (Variant("a", *none), Variant("b", *none, error_model=_PerOutput()))
    case = replace(toy_case, variants=("a", "b"))
    runs = {name: VariantRun(name, {"y": y}, {"y": np.zeros(2, bool)})
            for name, y in (("a", REF.astype(np.float32)), ("b", got))}
    exp = Expected("y", REF, FAMILY_TOL, label="f64", why="family")
    return {c.variant: c for c in _reference_checks(toy_family, case, runs, [exp])}


def test_an_error_within_its_own_outputs_bound_passes(toy_family, toy_case):
    checks = _checks(toy_family, toy_case, np.array([1.0015, 100.5], np.float32))
    assert checks["b"].check == "err-model" and checks["b"].ok
    assert checks["a"].check == "f64" and checks["a"].ok


def test_an_error_past_its_own_outputs_bound_fails_though_below_the_largest(toy_family, toy_case):
    # 0.01 on output 0 is far below output 1's bound (1.001) but past its own (0.002).
    checks = _checks(toy_family, toy_case, np.array([1.01, 100.0], np.float32))
    assert not checks["b"].ok and checks["b"].bound_index == (0,)
    assert "worst |err|/bound" in checks["b"].detail and "per output" in checks["b"].detail
