"""Variant.same_as in parity (checks/parity.py's _bitwise_against): a variant held to another's bits (ggml_b
to ggml) is compared bit for bit with that one, not the baseline, even where an error model judges it;
where the case does not run that one, against the baseline as any variant."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from strata_bench.cases import Variant
from strata_bench.toml_abi.error_model import TomlErrorModel
from strata_bench.checks.parity import _bitwise_against, _bitwise_checks
from strata_bench.gpu.launch import VariantRun

BASE = np.array([1.0, -2.0, 4.0], np.float32)
OTHER = np.array([1.0 + 2**-12, -2.0, 4.0], np.float32)  # not a's bits


def _run(variant, y):
    return VariantRun(variant, {"y": y}, {"y": np.zeros(y.shape, bool)})


@pytest.fixture
def family(toy_family):
    model = TomlErrorModel(baseline_factor=1e6)
    none = (lambda f, s: [], lambda *a: None)
    toy_family.variants = (Variant("a", *none), Variant("b", *none, error_model=model),
                           Variant("c", *none, error_model=model, same_as="b"))
    return toy_family


def test_against_the_same_as_variant_where_the_case_runs_it(family, toy_case):
    runs = {"a": _run("a", BASE), "b": _run("b", OTHER), "c": _run("c", OTHER.copy())}
    assert _bitwise_against(family, replace(toy_case, variants=("a", "b", "c")), "c", runs) == "b"
    assert _bitwise_against(family, replace(toy_case, variants=("a", "b", "c")), "b", runs) == "a"
    assert _bitwise_against(family, replace(toy_case, variants=("a", "c")), "c",
                            {k: runs[k] for k in ("a", "c")}) == "a"


def test_a_family_without_a_table_compares_with_the_baseline(toy_family, toy_case):
    assert _bitwise_against(toy_family, toy_case, "new", {"old": None, "new": None}) == "old"


def test_c_equal_to_b_passes_though_both_differ_from_the_baseline(family, toy_case):
    case = replace(toy_case, variants=("a", "b", "c"))
    runs = {"a": _run("a", BASE), "b": _run("b", OTHER), "c": _run("c", OTHER.copy())}
    b, c = _bitwise_checks(family, case, runs)
    assert (b.variant, b.ok, b.detail) == ("b", True, "y: not bitwise equal to a (judged by its error model)")
    assert (c.variant, c.ok, c.detail) == ("c", True, "")


def test_c_differing_from_b_fails_even_with_an_error_model_and_equal_to_the_baseline(family, toy_case):
    case = replace(toy_case, variants=("a", "b", "c"))
    runs = {"a": _run("a", BASE), "b": _run("b", OTHER), "c": _run("c", BASE.copy())}
    _, c = _bitwise_checks(family, case, runs)
    assert c.variant == "c" and not c.ok
    assert "1 of 3 elements differ" in c.detail and "first at row 0, column 0" in c.detail
    assert "b=" in c.detail and "(0x3f800800) c=" in c.detail  # against b's bits, named b


def test_without_b_c_is_judged_against_the_baseline_by_its_error_model(family, toy_case):
    case = replace(toy_case, variants=("a", "c"))
    (c,) = _bitwise_checks(family, case, {"a": _run("a", BASE), "c": _run("c", OTHER)})
    assert (c.variant, c.ok, c.detail) == ("c", True, "y: not bitwise equal to a (judged by its error model)")
    (same,) = _bitwise_checks(family, case, {"a": _run("a", BASE), "c": _run("c", BASE.copy())})
    assert (same.ok, same.detail) == (True, "")


def test_a_shape_mismatch_with_b_fails(family, toy_case):
    case = replace(toy_case, variants=("a", "b", "c"))
    runs = {"a": _run("a", BASE), "b": _run("b", OTHER), "c": _run("c", OTHER[:2].copy())}
    _, c = _bitwise_checks(family, case, runs)
    assert not c.ok and c.detail == "y: shape/dtype (2,) float32 != (3,) float32"


def test_bench_asks_the_same_question_none_where_the_error_model_judges(family, toy_case):
    from strata_bench.checks.parity import bitwise_target

    case = replace(toy_case, variants=("a", "b", "c"), fmt=toy_case.fmt)
    assert bitwise_target(family, case, "b", case.variants) is None  # judged by its model, not a's bits
    assert bitwise_target(family, case, "c", case.variants) == "b"  # held to b whatever its model
    alone = replace(toy_case, variants=("a", "c"))
    assert bitwise_target(family, alone, "c", alone.variants) is None  # b not run: its model judges it


def test_held_to_b_compares_every_output_where_the_family_compares_none_between_its_own(family, toy_case,
                                                                                       monkeypatch):
    """pfgemm compares no output between its variants (tensor-core sums); ggml_b is still held to ggml's bits."""
    from strata_bench.checks.parity import compared_names

    monkeypatch.setattr(family, "compared_outputs", lambda case: ())
    case = replace(toy_case, variants=("a", "b", "c"))
    assert compared_names(family, case, "c", "b") is None and compared_names(family, case, "b", "a") == ()
    runs = {"a": _run("a", BASE), "b": _run("b", OTHER), "c": _run("c", BASE.copy())}
    (c,) = _bitwise_checks(family, case, runs)  # b: nothing compared against a
    assert c.variant == "c" and not c.ok and "1 of 3 elements differ" in c.detail
    alone = replace(toy_case, variants=("a", "c"))
    assert _bitwise_checks(family, alone, {"a": _run("a", BASE), "c": _run("c", OTHER)}) == []
