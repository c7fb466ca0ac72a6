"""checks/f64.py: one output against one float64 reference, a piece at a time."""
from __future__ import annotations

import numpy as np

from strata_bench.cases import Expected
from strata_bench.checks import f64


def _check(ref, got, tol=1.0):
    exp = Expected("y", ref, tol, "t", "a")
    return f64.check(exp, f64.Reference(exp), "new", got, lambda index: f"at {index}")


def test_a_scalar_reference_an_empty_one_and_a_broadcast_output():
    """Shapes the whole-array check could not take (a 0-d reference raised) or took by broadcasting."""
    one = _check(np.array(2.0), np.array(2.5, np.float32))
    assert (one.ok, one.max_err, one.nmse, one.bound_ratio, one.bound_index, one.bound_at) == \
        (True, 0.5, 0.0625, 0.5, (), "at ()")
    empty = _check(np.ones((2, 0, 3)), np.ones((2, 0, 3), np.float32))
    assert (empty.ok, empty.max_err, empty.nmse, empty.bound_index, empty.bound_at) == (True, 0.0, 0.0, None, "")
    wide = _check(np.ones((1, 5)), np.arange(5, dtype=np.float32) * 0.5 + 1.0)
    assert (wide.ok, wide.max_err, wide.bound_index, wide.bound_at) == (False, 2.0, (0, 4), "at (0, 4)")


def test_the_worst_element_of_a_transposed_reference_is_named_in_its_own_indices():
    ref = np.arange(12.0).reshape(3, 4).T  # (4, 3), Fortran order: read in memory order, named by index
    got = ref.astype(np.float32)
    got[2, 1] += 3.0
    check = _check(ref, got, tol=np.full(ref.shape, 0.5))
    assert (check.ok, check.bound_index, check.bound_at, check.bound_ratio) == (False, (2, 1), "at (2, 1)", 6.0)
    assert "worst |err|/bound 6 at at (2, 1) (|err| 3.000e+00 > bound 5.000e-01; t)" in check.detail


def test_ratio_of_no_error_a_nan_error_and_a_zero_bound():
    assert f64.ratio(0.0, 0.0) == 0.0 and f64.ratio(1.0, 0.0) == np.inf and f64.ratio(np.nan, 1.0) == np.inf
    assert f64.ratio(1.0, 4.0) == 0.25
