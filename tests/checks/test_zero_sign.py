"""ggml's q4_0 dequantization stores +0.0 where gguf-py stores -0.0 (ggml/error.py ZeroSignModel): with its
model, the case's only variant passes with that zero and fails on any other change (a value 1 ulp off, a
zero turned into the smallest denormal); without the model the zero's sign alone fails, as before."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from strata_bench.cases import Expected, Variant
from strata_bench.checks.parity import _reference_checks
from strata_bench.ggml.error import ZeroSignModel
from strata_bench.gpu.launch import VariantRun

ORACLE = np.array([-0.0, 0.5, -1.25, 0.0], np.float32)  # gguf-py's float32 (a negative d made the -0.0)


def _refs(oracle):
    return [Expected("y_bits", oracle.view(np.uint32).astype(np.float64), 0.0, label="gguf f32 bits", why="bits"),
            Expected("y", oracle.astype(np.float64), 0.0, label="gguf f32", why="value")]


def _checks(family, case, got, model):
    none = (lambda f, s: [], lambda *a: None)
    family.variants = (Variant("ggml", *none, error_model=model),)
    case = replace(case, fmt="q4_0", variants=("ggml",))
    outputs = {"y": got, "y_bits": got.view(np.uint32).astype(np.float64)}
    family.output_values = lambda case, name, outs: outs[name]
    run = VariantRun("ggml", outputs, {k: np.zeros(4, bool) for k in outputs})
    return [(c.label, c.check, c.ok) for c in _reference_checks(family, case, {"ggml": run}, _refs(ORACLE))]


MODEL = ZeroSignModel(("q4_0",))
PLUS_ZERO = np.array([0.0, 0.5, -1.25, 0.0], np.float32)


def test_a_zero_of_the_other_sign_passes_under_the_model(toy_family, toy_case):
    assert _checks(toy_family, toy_case, PLUS_ZERO, MODEL) == [("gguf f32 bits", "err-model", True),
                                                              ("gguf f32", "err-model", True)]


def test_the_zeros_sign_alone_fails_without_the_model(toy_family, toy_case):
    assert _checks(toy_family, toy_case, PLUS_ZERO, None) == [("gguf f32 bits", "f64", False), ("gguf f32", "f64", True)]


@pytest.mark.parametrize("changed", [
    np.array([0.0, np.nextafter(np.float32(0.5), np.float32(1)), -1.25, 0.0], np.float32),  # a value, 1 ulp
    np.array([np.float32(1e-45), 0.5, -1.25, 0.0], np.float32),  # a zero made the smallest denormal
    np.array([0.0, 0.5, -1.25, -1.0], np.float32),  # a zero made a value of the other sign
])
def test_any_other_change_still_fails_under_the_model(toy_family, toy_case, changed):
    checks = _checks(toy_family, toy_case, changed, MODEL)
    assert not all(ok for _, _, ok in checks), checks


def test_the_model_judges_only_its_formats_and_says_why():
    assert MODEL.applies("q4_0") and not MODEL.applies("q4_1")
    assert "-0.0" in MODEL.note and "d*q + (-8d)" in MODEL.note
