"""Parity checks on host data: written, bitwise, reference and equal-error checks (no GPU needed)."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.cases import Expected
from strata_bench.checks.parity import _bitwise_checks, _error_equal_checks, _reference_checks, _written_checks
from strata_bench.runner.launch import VariantRun, _differs



def _run(variant, y, unwritten=None):
    return VariantRun(variant, {"y": y}, {"y": np.zeros(y.shape, bool) if unwritten is None else unwritten})


def test_bitwise_failure_names_first_and_worst_with_hex_and_ulp(toy_family, toy_case):
    base = np.zeros((2, 8), np.float32)
    other = base.copy()
    other[0, 3] = np.float32(1e-7)
    other[1, 5] = np.float32(2.0)
    checks = _bitwise_checks(toy_family, toy_case, {"old": _run("old", base), "new": _run("new", other)})
    (check,) = checks
    assert not check.ok
    assert "2 of 16 elements differ" in check.detail
    assert "first at row 3, column 0" in check.detail
    assert "worst at row 5, column 1" in check.detail
    assert "0x40000000" in check.detail  # 2.0f
    assert "ulp" in check.detail


def test_bitwise_equal_passes_and_negative_zero_differs(toy_family, toy_case):
    base = np.zeros(4, np.float32)
    assert _bitwise_checks(toy_family, toy_case, {"old": _run("old", base), "new": _run("new", base.copy())})[0].ok
    neg = -base
    assert not _bitwise_checks(toy_family, toy_case, {"old": _run("old", base), "new": _run("new", neg)})[0].ok


def test_unwritten_elements_are_the_ones_whose_bytes_differ_between_poisons(toy_family, toy_case):
    a = np.array([1.0, np.nan], np.float32)
    b = np.array([1.0, 8.4e37], np.float32)
    mask = _differs(a, b)
    assert mask.tolist() == [False, True]
    checks = _written_checks(toy_family, toy_case, VariantRun("new", {"y": a}, {"y": mask}))
    assert not checks[0].ok and "1 elements not written" in checks[0].detail


def test_reference_check_fails_above_tolerance_and_on_nan(toy_family, toy_case):
    ref = np.array([1.0, 2.0])
    ok = _reference_checks(toy_family, toy_case, {"old": _run("old", np.array([1.0, 2.0 + 1e-6], np.float32))},
                           [Expected("y", ref, tol=1e-5, why="t")])
    assert ok[0].ok and ok[0].max_err == pytest.approx(np.float32(2.0 + 1e-6) - 2.0)
    bad = _reference_checks(toy_family, toy_case, {"old": _run("old", np.array([1.0, 2.1], np.float32))},
                            [Expected("y", ref, tol=1e-5, why="t")])
    assert not bad[0].ok and "max|err|" in bad[0].detail
    nan = _reference_checks(toy_family, toy_case, {"old": _run("old", np.array([np.nan, 2.0], np.float32))},
                            [Expected("y", ref, tol=1.0, why="t")])
    assert not nan[0].ok


def test_zero_output_cannot_pass_a_relative_reference(toy_family, toy_case):
    ref = np.full(4, 3.0)
    res = _reference_checks(toy_family, toy_case, {"old": _run("old", np.zeros(4, np.float32))},
                            [Expected("y", ref, tol=1e-3, why="t")])
    assert not res[0].ok


def test_error_equal_enforced_only_where_the_family_requires_it(toy_family, toy_case):
    class Strict(type(toy_family)):
        def errors_must_match(self, case): return True

    ref = np.array([1.0])
    checks = _reference_checks(toy_family, toy_case, {"old": _run("old", np.array([1.0], np.float32)),
                                      "new": _run("new", np.array([1.0 + 2**-20], np.float32))},
                               [Expected("y", ref, tol=1e-3, why="t")])
    assert _error_equal_checks(toy_family, toy_case, checks)[0].ok
    strict = _error_equal_checks(Strict(), toy_case, checks)[0]
    assert not strict.ok and "differ" in strict.detail
