"""Variant.omits in parity: a variant that does not compute some of the family's outputs (an engine's graph
never forms that intermediate) is checked on the others alone; the outputs it omits are neither written,
finite, bitwise nor float64 checks of it, and the other variants' checks of them are unchanged."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from strata_bench.cases import Expected, Variant
from strata_bench.checks import parity
from strata_bench.gpu.launch import VariantRun

Y = np.array([1.0, -2.0, 4.0], np.float32)
POISON = np.full(3, np.nan, np.float32)


@pytest.fixture
def family(toy_family):
    none = (lambda f, s: [], lambda *a: None)
    toy_family.variants = (Variant("a", *none), Variant("b", *none, omits=("rs", "rs:derived")))
    toy_family.reference = lambda case, host: [Expected("y", Y.astype(np.float64), 0.0, "exact"),
                                               Expected("rs", Y.astype(np.float64), 0.0, "exact")]
    return toy_family


def _fake_run(family, case, variant, kernels, dev):
    # b leaves rs as the poison it found: unwritten, non-finite, not a's bits
    rs = Y.copy() if variant == "a" else POISON.copy()
    unwritten = np.zeros(3, bool) if variant == "a" else np.ones(3, bool)
    return VariantRun(variant, {"y": Y.copy(), "rs": rs}, {"y": np.zeros(3, bool), "rs": unwritten})


def test_omitted_outputs_are_not_checked_for_that_variant_alone(family, toy_case, monkeypatch, cache):
    monkeypatch.setattr(parity, "run_variant", _fake_run)
    result = parity.check_case(family, replace(toy_case, variants=("a", "b")), None, 0)
    assert result.status.value == "PASS", [c for c in result.checks if not c.ok]
    about_b = [c for c in result.checks if c.variant == "b"]
    assert {c.check for c in about_b} == {"written", "finite", "bitwise", "f64"}
    assert not any("rs" in c.detail for c in about_b)
    assert len([c for c in result.checks if c.check == "f64" and c.variant == "a"]) == 2  # y and rs
    assert len([c for c in about_b if c.check == "f64"]) == 1  # y alone


def test_without_omits_the_same_run_fails(family, toy_case, monkeypatch, cache):
    family.variants = (family.variants[0], replace(family.variants[1], omits=()))
    monkeypatch.setattr(parity, "run_variant", _fake_run)
    result = parity.check_case(family, replace(toy_case, variants=("a", "b")), None, 0)
    failed = {(c.check, c.variant) for c in result.checks if not c.ok}
    assert {("written", "b"), ("finite", "b"), ("bitwise", "b")} <= failed


def test_a_family_without_a_table_omits_nothing(toy_family):
    assert parity.omitted_outputs(toy_family, "new") == ()
    assert parity.omitted_outputs(object(), "new") == ()
