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


def _reference_checks_before(family, case, runs, refs):
    """The comparison as it was before the one-pass rewrite (kept as the oracle the new one must equal)."""
    from strata_bench.checks.outcome import CheckResult

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
            special_ok = bool(np.array_equal(got[~np.isfinite(ref)], ref[~np.isfinite(ref)], equal_nan=True))
            ok = finite and special_ok and max_err <= exp.tol
            detail = "" if ok else (f"{exp.output} vs {exp.label}: max|err| {max_err:.3e} > tol {exp.tol:.3e}"
                                    f" ({exp.why})" if finite and special_ok else
                                    f"{exp.output} vs {exp.label}: non-finite or mismatched special values")
            out.append(CheckResult("f64", variant, ok, detail, max_err, max_ref, exp.tol, nmse, exp.label))
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
    refs = [Expected("y", ref, tol=1e-4, why="t", label="a"), Expected("y", ref * 2.0, tol=1e6, why="u", label="b")]
    want = _reference_checks_before(toy_family, toy_case, runs, refs)
    got = _reference_checks(toy_family, toy_case, runs, refs)
    assert [_fields(c) for c in got] == [_fields(c) for c in want]
    assert [c.variant for c in got] == ["old", "new", "same"] * 2


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
