"""Parity with a variant's own error model (toml_abi/error_model.py): not required to be bitwise equal to the
baseline, its max|err| judged by its bound (per format, or k times the baseline's max|err|), and its ratio
to the baseline's max|err| recorded."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from strata_bench.cases import Expected, Variant
from strata_bench.toml_abi.error_model import TomlErrorModel, parse_error_model
from strata_bench.checks.parity import _bitwise_checks, _reference_checks
from strata_bench.errors import InputError
from strata_bench.gpu.launch import VariantRun


def _run(variant, y):
    return VariantRun(variant, {"y": y}, {"y": np.zeros(y.shape, bool)})


@pytest.fixture
def family(toy_family):
    def with_model(model):
        toy_family.variants = (Variant("old", lambda f, s: [], lambda *a: None),
                               Variant("eng", lambda f, s: [], lambda *a: None, error_model=model))
        return toy_family
    return with_model


REF = np.array([1.0, -2.0, 4.0])
RUNS = {"old": _run("old", np.array([1.0, -2.0, 4.0 + 2**-21], np.float32)),
        "eng": _run("eng", np.array([1.0 + 2**-12, -2.0, 4.0], np.float32))}


def test_bitwise_difference_is_not_a_failure_but_is_said(family, toy_case):
    toy_case = replace(toy_case, variants=("old", "eng"))
    (check,) = _bitwise_checks(family(TomlErrorModel(baseline_factor=2.0)), toy_case, RUNS)
    assert check.ok and check.detail == "y: not bitwise equal to old (judged by its error model)"
    (plain,) = _bitwise_checks(family(None), toy_case, RUNS)
    assert not plain.ok


def test_baseline_factor(family, toy_case):
    exp = Expected("y", REF, tol=1e-6, why="t", label="f64")
    base_err, eng_err = 2**-21, 2**-12
    fam = family(TomlErrorModel(baseline_factor=500.0))  # 500 x 2^-21 < 2^-12: fails
    old, eng = _reference_checks(fam, toy_case, RUNS, [exp])
    assert (old.check, old.ok) == ("f64", True) and old.baseline_ratio is None
    assert (eng.check, eng.ok, eng.max_err, eng.tol) == ("err-model", False, eng_err, 500.0 * base_err)
    assert eng.baseline_ratio == pytest.approx(2**9) and eng.bound_ratio == pytest.approx(2**9 / 500)
    assert eng.detail == (f"y vs f64: worst |err|/bound 1.02 at row 0, column 0 (|err| {eng_err:.3e} > bound "
                          f"{500 * base_err:.3e}; error model: 500 x the baseline's max|err|; the baseline's max|err| "
                          f"{base_err:.3e})")
    _, eng = _reference_checks(family(TomlErrorModel(baseline_factor=512.0)), toy_case, RUNS, [exp])
    assert eng.ok and eng.detail == "" and eng.baseline_ratio == pytest.approx(512.0)


def test_per_format_bound_relative_to_max_ref(family, toy_case):
    exp = Expected("y", REF, tol=1e-6, why="t", label="f64")
    _, eng = _reference_checks(family(TomlErrorModel(per_format=(("q8_0", 2**-12 / 4),))), toy_case, RUNS, [exp])
    assert eng.check == "err-model" and eng.ok and eng.tol == 2**-12  # 2^-14 x max|ref| 4
    _, eng = _reference_checks(family(TomlErrorModel(per_format=(("q8_0", 5e-5),))), toy_case, RUNS, [exp])
    assert not eng.ok and eng.detail.endswith("; error model: 5e-05 x max|ref| for q8_0; the baseline's max|err| "
                                              "4.768e-07)")
    # a format the map does not list keeps the family's own bound (and bitwise)
    _, eng = _reference_checks(family(TomlErrorModel(per_format=(("iq2_xxs", 1.0),))), toy_case, RUNS, [exp])
    assert eng.check == "f64" and not eng.ok


def test_a_baseline_without_error_gives_an_infinite_ratio(family, toy_case):
    exact = {"old": _run("old", REF.astype(np.float32)), "eng": RUNS["eng"]}
    _, eng = _reference_checks(family(TomlErrorModel(baseline_factor=4.0)), toy_case, exact,
                               [Expected("y", REF, tol=1e-6, why="t", label="f64")])
    assert not eng.ok and math.isinf(eng.baseline_ratio) and eng.tol == 0.0


@pytest.mark.parametrize("value,line", [
    ({}, "e: expected a table with per_format = { FORMAT = bound, ... } and/or baseline_factor = k, got {}"),
    ({"per_format": {"q9": 1e-3}}, "e.per_format.q9: not a format of the family (q8_0, iq2_xxs)"),
    ({"per_format": {"q8_0": -1}}, "e.per_format.q8_0: expected a bound >= 0 (relative to max|ref|), got -1"),
    ({"baseline_factor": 0}, "e.baseline_factor: expected a number > 0, got 0"),
    ({"factor": 2}, "e: expected a table with per_format"),
])
def test_parse_errors(value, line):
    with pytest.raises(InputError) as err:
        parse_error_model(value, ("q8_0", "iq2_xxs"), "e")
    assert str(err.value).startswith(line)


def test_parse():
    model = parse_error_model({"per_format": {"q8_0": 1e-3}, "baseline_factor": 4}, ("q8_0",), "e")
    assert model == TomlErrorModel((("q8_0", 1e-3),), 4.0) and model.applies("iq1_s")
    assert model.describe() == "0.001 x max|ref| for q8_0; 4 x the baseline's max|err|"
