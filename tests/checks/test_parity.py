"""Parity checks on host data: written, bitwise, reference and equal-error checks (no GPU needed)."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.cases import Expected
from strata_bench.checks.parity import _bitwise_checks, _error_equal_checks, _reference_checks, _written_checks
from strata_bench.gpu.launch import VariantRun, _differs



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
    assert not bad[0].ok and "worst |err|/bound" in bad[0].detail
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


def _reference_checks_before(family, case, runs, refs):
    """The comparison written plainly, element by element (the oracle the one-pass code must equal)."""
    from strata_bench.checks.outcome import CheckResult

    out = []
    for exp in refs:
        for variant, run in runs.items():
            got = np.asarray(family.output_values(case, exp.output, run.outputs), dtype=np.float64)
            ref = np.asarray(exp.ref, dtype=np.float64)
            bound = np.broadcast_to(np.asarray(exp.tol, dtype=np.float64), ref.shape)
            with np.errstate(invalid="ignore", over="ignore"):
                err = np.abs(got - ref)
            err0 = np.where(np.isfinite(ref), err, 0.0)
            finite = bool(np.isfinite(err[np.isfinite(ref)]).all())
            max_err = float(np.nanmax(err0)) if err.size else 0.0
            max_ref = float(np.nanmax(np.abs(np.where(np.isfinite(ref), ref, 0.0)))) if ref.size else 0.0
            denom = float(np.sum(np.where(np.isfinite(ref), ref, 0.0) ** 2))
            nmse = float(np.sum(err0 ** 2) / denom) if denom else 0.0
            special_ok = bool(np.array_equal(got[~np.isfinite(ref)], ref[~np.isfinite(ref)], equal_nan=True))
            ok = finite and special_ok and bool((err0 <= bound).all())
            ratio, index, at, worst_err, worst_bound = None, None, "", 0.0, 0.0
            if err.size:
                # per element: 0 without an error, inf for a NaN error or a zero bound
                with np.errstate(divide="ignore", invalid="ignore"):
                    each = np.where(err0 == 0, 0.0, err0 / bound)
                each = np.where(np.isnan(each), np.inf, each)
                flat = int(np.argmax(np.where(np.isnan(err0), np.inf, err0))) if np.ndim(exp.tol) == 0 \
                    else int(np.argmax(each))
                index = tuple(int(i) for i in np.unravel_index(flat, ref.shape))
                ratio, at = float(each[index]), family.describe_index(case, exp.output, index)
                worst_err, worst_bound = float(err0[index]), float(bound[index])
            detail = "" if ok else (f"{exp.output} vs {exp.label}: worst |err|/bound {ratio:.3g} at {at} "
                                    f"(|err| {worst_err:.3e} > bound {worst_bound:.3e}; {exp.why})"
                                    if finite and special_ok else
                                    f"{exp.output} vs {exp.label}: non-finite or mismatched special values")
            out.append(CheckResult("f64", variant, ok, detail, max_err, max_ref, float(np.max(exp.tol)), nmse,
                                   exp.label, ratio, index, at))
    return out


def _fields(check):
    return tuple("nan" if isinstance(v, float) and np.isnan(v) else v for v in vars(check).values())


@pytest.mark.parametrize("seed", range(12))
def test_one_pass_reference_checks_equal_the_original_exactly(toy_family, toy_case, seed):
    rng = np.random.default_rng(seed)
    shape = (3, 257)
    ref = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)
    if seed % 3 == 1:  # non-finite references, matched or not
        ref.ravel()[rng.integers(0, ref.size, 4)] = [np.inf, -np.inf, np.nan, np.inf]
    if seed == 5:
        ref[:] = 0.0  # denominator 0
    if seed == 8:
        ref = np.empty((0, 4))
        shape = ref.shape
    base = ref.astype(np.float32)
    moved = base.copy()
    if moved.size:
        moved.ravel()[rng.integers(0, moved.size, 5)] *= np.float32(1 + 1e-3 * (seed + 1))
    if seed % 4 == 2 and moved.size:
        moved.ravel()[3] = np.nan
    if seed % 4 == 3 and moved.size:
        moved.ravel()[7] = np.inf
    runs = {"old": _run("old", base), "new": _run("new", moved), "same": _run("same", base.copy())}
    own = np.abs(ref) * 1e-3 + rng.uniform(0.0, 1e-4, ref.shape) if seed % 2 else np.full(ref.shape[-1:], 1e-4)
    refs = [Expected("y", ref, tol=1e-4, why="t", label="a"), Expected("y", ref * 2.0, tol=1e6, why="u", label="b"),
            Expected("y", ref, tol=np.where(np.isfinite(own), own, 1.0), why="v", label="c")]
    want = _reference_checks_before(toy_family, toy_case, runs, refs)
    got = _reference_checks(toy_family, toy_case, runs, refs)
    assert [_fields(c) for c in got] == [_fields(c) for c in want]
    assert [c.variant for c in got] == ["old", "new", "same"] * 3


@pytest.mark.parametrize("edge", ["at-bound", "a-float-above", "a-float-below", "subnormal", "overflowing-quotient",
                                  "zero-bound", "infinite-bound", "nan-bound"])
def test_own_bounds_at_the_edge_of_their_errors_decide_as_the_original(toy_family, toy_case, edge):
    """An error equal to its own bound, a float above or below it, subnormal, or over a bound so small that
    the quotient overflows, and zero, infinite or NaN bounds: the same verdict and worst element as the
    element-by-element comparison."""
    rng = np.random.default_rng(33)
    got = (rng.standard_normal((3, 40)) * 1e-3).astype(np.float32)
    got[0, 0] = 0.0
    i = (1, 7)
    if edge == "subnormal":
        got[i] = np.float32(1e-45)
    if edge == "overflowing-quotient":
        got[i] = np.float32(3e38)
    err = np.abs(got.astype(np.float64))  # the reference is 0
    bound = err * 2.0 + 1e-9
    bound[i] = {"at-bound": err[i], "a-float-above": np.nextafter(err[i], 0.0), "subnormal": np.nextafter(err[i], 0.0),
                "a-float-below": np.nextafter(err[i], np.inf), "overflowing-quotient": 1e-300, "zero-bound": 0.0,
                "infinite-bound": np.inf, "nan-bound": np.nan}[edge]
    if edge == "zero-bound":
        bound[0, 0] = 0.0  # no error there: ratio 0
    moved = got.copy()
    moved[2, 3] *= np.float32(1.5)
    runs = {"old": _run("old", got), "new": _run("new", moved)}
    refs = [Expected("y", np.zeros(got.shape), tol=bound, why="t")]
    want = _reference_checks_before(toy_family, toy_case, runs, refs)
    checks = _reference_checks(toy_family, toy_case, runs, refs)
    assert [_fields(c) for c in checks] == [_fields(c) for c in want]
    assert checks[0].ok == (edge in ("at-bound", "a-float-below", "infinite-bound"))


@pytest.mark.parametrize("seed", range(12))
def test_the_largest_quotient_found_piece_by_piece_is_the_wholes(toy_family, toy_case, seed, monkeypatch):
    """Pieces of 7 quotients, so the largest, a tie or a NaN falls in any piece: the same checks."""
    from strata_bench.checks import f64, parity

    monkeypatch.setattr(parity, "PIECE", 7)
    monkeypatch.setattr(f64, "PIECE", 7)
    test_one_pass_reference_checks_equal_the_original_exactly(toy_family, toy_case, seed)
    for edge in ("at-bound", "a-float-above", "overflowing-quotient"):
        test_own_bounds_at_the_edge_of_their_errors_decide_as_the_original(toy_family, toy_case, edge)


@pytest.mark.parametrize("special", ["transposed", "nan", "-inf", "+inf", "all-nan", "transposed-inf"])
def test_reference_statistics_without_a_finite_mask_equal_the_original(toy_family, toy_case, special):
    """The finite mask is made only where max or min is not finite: every kind of special value, alone,
    and a reference not in C order, give the original's numbers."""
    rng = np.random.default_rng(7)
    ref = rng.standard_normal((257, 3)) * 1e3
    if special.startswith("transposed"):
        ref = ref.T  # (3, 257), Fortran order
    else:
        ref = np.ascontiguousarray(ref.T)
    where = {"nan": np.nan, "-inf": -np.inf, "+inf": np.inf, "transposed-inf": np.inf}.get(special)
    if where is not None:
        ref[1, 5] = where
    if special == "all-nan":
        ref[:] = np.nan
    base = np.nan_to_num(ref, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32)
    moved = base.copy()
    moved[2, 9] *= np.float32(1.01)
    runs = {"old": _run("old", base), "new": _run("new", moved)}
    refs = [Expected("y", ref, tol=1e-1, why="t", label="a")]
    want = _reference_checks_before(toy_family, toy_case, runs, refs)
    got = _reference_checks(toy_family, toy_case, runs, refs)
    assert [_fields(c) for c in got] == [_fields(c) for c in want]


class _RelatedFamily:
    """Duck-typed family: N-column cases whose columns are checked against 1-column related cases."""

    def __init__(self):
        self.made = []

    def make_inputs(self, case):
        self.made.append(case.name)
        return {}

    def related_cases(self, case):
        from dataclasses import replace

        if case.param("col") is not None or case.ncols == 1:
            return []
        return [(replace(case, ncols=1, params=(("col", j),)), "y", lambda o, j=j: o["y"][j:j + 1])
                for j in range(case.ncols)]

    def reference(self, case, host):
        return []

    def to_device(self, case, host):
        return {}

    def device_inputs(self, case, host):
        return {}

    def written_mask(self, case, output):
        return None

    def allows_nonfinite(self, case, output):
        return False

    def compared_outputs(self, case):
        return None

    def errors_must_match(self, case):
        return False


def test_related_runs_are_shared_within_a_loop_and_the_checks_are_the_same(monkeypatch):
    from strata_bench.cases import Case
    from strata_bench.checks import parity
    from strata_bench.checks.phases import PhaseTimes

    launched = []

    def fake_run(family, case, variant, kernels, dev):
        launched.append((case.name, variant))
        col = case.param("col")
        y = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
        y = y[col:col + 1] if col is not None else y[:case.ncols]
        return VariantRun(variant, {"y": y}, {"y": np.zeros(y.shape, bool)})

    monkeypatch.setattr(parity, "run_variant", fake_run)
    cases = [Case("toy", "q8_0", 8, 32, ncols=n) for n in (2, 3, 4)]
    shared, times = parity.CaseChecker(PhaseTimes()), PhaseTimes()
    alone = parity.CaseChecker(share_runs=False)
    fam_a, fam_b = _RelatedFamily(), _RelatedFamily()
    with_sharing = [shared(fam_a, c, None, 0) for c in cases]
    sharing_launches = list(launched)
    launched.clear()
    without = [alone(fam_b, c, None, 0) for c in cases]
    assert [r.checks for r in with_sharing] == [r.checks for r in without]
    assert all(r.status.value == "PASS" for r in with_sharing)
    related = [n for n, _ in sharing_launches if "/col=" in n]
    assert len(related) == 2 * 4  # col=0..3 once each, for both variants (2 + 3 + 4 = 9 without sharing)
    assert len([n for n, _ in launched if "/col=" in n]) == 2 * 9
    assert shared.times.counts["comparisons"] == 3 and shared.times.seconds["launches"] >= 0
    # A second device does not reuse the first one's runs.
    shared(fam_a, cases[0], None, 1)
    assert sum("/col=" in n for n, _ in launched) == 2 * 9 + 2 * 2
    assert times.total == 0.0


@pytest.mark.parametrize("bad", [None, np.nan, np.inf])
def test_reference_check_fields_are_plain_python_types(toy_family, toy_case, bad):
    ref = np.linspace(-2.0, 3.0, 96).reshape(3, 32)
    got = ref.astype(np.float32)
    if bad is not None:
        got[1, 5] = bad
    checks = _reference_checks(toy_family, toy_case, {"v": _run("v", got)}, [Expected("y", ref, tol=1e-6, why="t")])
    assert [(type(c.ok), type(c.max_err), type(c.nmse)) for c in checks] == [(bool, float, float)]
    assert checks[0].ok is (bad is None)


# --- per-element bounds ----------------------------------------------------------------------------------
def _one_element_off(value=3.1e-5):
    """A (3 columns, 20 rows) output equal to its zero reference but at column 2, row 17."""
    got = np.zeros((3, 20), np.float32)
    got[2, 17] = np.float32(value)
    return got


def _own_bounds():
    """1e-3 everywhere but column 2, row 17, whose own bound is 1.8e-5."""
    tol = np.full((3, 20), 1e-3)
    tol[2, 17] = 1.8e-5
    return tol


def test_an_element_above_its_own_bound_fails_though_max_err_is_below_the_largest_bound(toy_family, toy_case):
    runs = {"new": _run("new", _one_element_off())}
    ref = np.zeros((3, 20))
    reduced = Expected("y", ref, tol=float(_own_bounds().max()), why="t", label="f64(q8_1 acts)")
    assert _reference_checks(toy_family, toy_case, runs, [reduced])[0].ok  # what the max of the bounds let through
    (check,) = _reference_checks(toy_family, toy_case, runs,
                                 [Expected("y", ref, tol=_own_bounds(), why="t", label="f64(q8_1 acts)")])
    assert not check.ok
    assert check.detail == ("y vs f64(q8_1 acts): worst |err|/bound 1.72 at row 17, column 2 "
                            "(|err| 3.100e-05 > bound 1.800e-05; t)")
    assert (check.max_err, check.tol) == (float(np.float32(3.1e-5)), 1e-3)  # tol: the largest bound
    assert (check.bound_ratio, check.bound_index, check.bound_at) == (
        float(np.float32(3.1e-5)) / 1.8e-5, (2, 17), "row 17, column 2")


def test_a_passing_check_records_its_worst_element_and_a_scalar_bound_names_the_largest_error(toy_family, toy_case):
    runs = {"new": _run("new", _one_element_off(1e-5))}
    ref = np.zeros((3, 20))
    (own,) = _reference_checks(toy_family, toy_case, runs, [Expected("y", ref, tol=_own_bounds(), why="t")])
    assert own.ok and own.detail == "" and own.bound_index == (2, 17)
    assert own.bound_ratio == pytest.approx(float(np.float32(1e-5)) / 1.8e-5)
    (one,) = _reference_checks(toy_family, toy_case, runs, [Expected("y", ref, tol=1e-6, why="t", label="f64")])
    assert one.detail == "y vs f64: worst |err|/bound 10 at row 17, column 2 (|err| 1.000e-05 > bound 1.000e-06; t)"
    assert (one.tol, one.bound_index) == (1e-6, (2, 17))


def test_a_bound_per_row_broadcasts_and_a_bound_of_another_shape_is_an_input_error(toy_family, toy_case):
    from strata_bench.errors import InputError

    runs = {"new": _run("new", _one_element_off())}
    per_row = np.full(20, 1e-3)
    per_row[17] = 2e-5
    (check,) = _reference_checks(toy_family, toy_case, runs, [Expected("y", np.zeros((3, 20)), tol=per_row, why="t")])
    assert not check.ok and check.bound_index == (2, 17) and check.tol == 1e-3
    with pytest.raises(InputError, match=r"^y vs ref: tolerance of shape \(3,\) does not broadcast to the "
                                         r"reference's \(3, 20\)$"):
        _reference_checks(toy_family, toy_case, runs, [Expected("y", np.zeros((3, 20)), tol=np.ones(3), why="t")])


def test_zero_bounds_give_ratio_zero_without_error_and_inf_with_one(toy_family, toy_case):
    ref = np.zeros((3, 20))
    exact = _reference_checks(toy_family, toy_case, {"new": _run("new", np.zeros((3, 20), np.float32))},
                              [Expected("y", ref, tol=np.zeros((3, 20)), why="t")])[0]
    assert exact.ok and exact.bound_ratio == 0.0
    off = _reference_checks(toy_family, toy_case, {"new": _run("new", _one_element_off())},
                            [Expected("y", ref, tol=0.0, why="t")])[0]
    assert not off.ok and off.bound_ratio == np.inf and off.bound_index == (2, 17)


def test_a_failed_case_hands_its_arrays_to_on_failure_and_a_passing_one_does_not(monkeypatch):
    from strata_bench.cases import Case
    from strata_bench.checks import parity

    class OneReference(_RelatedFamily):
        def make_inputs(self, case):
            return {"x": np.arange(3.0)}

        def related_cases(self, case):
            return []

        def reference(self, case, host):
            return [Expected("y", np.zeros(3), tol=np.array([1.0, 1e-9, 1.0]), why="t")]

        def output_values(self, case, name, outputs):
            return outputs[name]

        def describe_index(self, case, output, index):
            return f"element {index[0]}"

    def fake_run(family, case, variant, kernels, dev):
        y = np.full(3, 1e-6 if case.data == "seed:2" else 0.0, np.float32)
        return VariantRun(variant, {"y": y}, {"y": np.zeros(3, bool)})

    monkeypatch.setattr(parity, "run_variant", fake_run)
    seen = []
    checker = parity.CaseChecker(on_failure=lambda *args: seen.append(args))
    passed = checker(OneReference(), Case("toy", "q8_0", 3, 32, data="seed:1"), None, 0)
    assert passed.status.value == "PASS" and seen == []
    failed = checker(OneReference(), Case("toy", "q8_0", 3, 32, data="seed:2"), None, 0)
    assert failed.status.value == "FAIL"
    ((result, host, runs, refs),) = seen
    assert result is failed and host["x"].tolist() == [0.0, 1.0, 2.0] and set(runs) == {"old", "new"}
    assert [e.label for e in refs] == ["ref"] and runs["new"].outputs["y"][1] == np.float32(1e-6)


@pytest.mark.parametrize("bound", ["scalar", "own"])
def test_a_reference_of_many_pieces_checked_on_threads_equals_the_original(toy_family, toy_case, bound, monkeypatch):
    """A reference of several pieces (checks/pieces.py), on the pool's threads: the numbers of the plain
    element-by-element comparison, bit for bit (max|err|, NMSE, worst element), however many threads."""
    from strata_bench.checks import f64, pieces

    rng = np.random.default_rng(11)
    ref = rng.standard_normal((301, 997)) * 10.0 ** rng.integers(-3, 4, (301, 997))
    ref[5, 7], ref[200, 3] = np.inf, np.nan
    got = ref.astype(np.float32)
    got[np.isnan(ref)] = np.nan
    moved = got.copy()
    moved.ravel()[rng.integers(0, got.size, 50)] *= np.float32(1.001)
    tol = 1e-2 if bound == "scalar" else np.abs(ref) * 1e-4 + 1e-6
    runs = {"old": _run("old", got), "new": _run("new", moved)}
    refs = [Expected("y", ref, tol=tol, why="t", label="a"), Expected("y", ref.T.copy().T, tol=tol, why="t", label="b")]
    monkeypatch.setattr(f64, "PIECE", 1 << 14)
    assert len(pieces.leaves(ref.size, f64.PIECE)) > 8
    want = [_fields(c) for c in _reference_checks_before(toy_family, toy_case, runs, refs)]
    for threads in (1, 3):
        monkeypatch.setattr(pieces.os, "cpu_count", lambda n=threads: n)
        assert [_fields(c) for c in _reference_checks(toy_family, toy_case, runs, refs)] == want


def test_integer_and_half_outputs_are_read_as_their_float64_copies(toy_family, toy_case):
    """The check widens an output as it reads it: the same checks as over a float64 copy."""
    rng = np.random.default_rng(2)
    bits = rng.integers(0, 1 << 32, (7, 300), dtype=np.uint64).astype(np.uint32)
    half = rng.standard_normal((7, 300)).astype(np.float16)
    for out in (bits, half):
        ref = out.astype(np.float64) * (1 + 1e-6)
        refs = [Expected("y", ref, tol=1e-3, why="t"), Expected("y", ref, tol=np.abs(ref) * 1e-5, why="t")]
        plain = _reference_checks(toy_family, toy_case, {"old": _run("old", out)}, refs)
        wide = _reference_checks(toy_family, toy_case, {"old": _run("old", out.astype(np.float64))}, refs)
        assert [_fields(c) for c in plain] == [_fields(c) for c in wide]
