"""checks/reuse.py: the work arrays and the variants with an earlier variant's outputs."""
from __future__ import annotations

import numpy as np

from strata_bench.checks.reuse import Scratch, twins_of
from strata_bench.gpu.launch import VariantRun


def _run(variant, **outputs):
    return VariantRun(variant, outputs, {n: np.zeros(a.shape, bool) for n, a in outputs.items()})


def test_twins_are_the_first_earlier_variant_with_the_same_bits_names_and_layout():
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    neg = y.copy()
    neg[0, 0] = -0.0  # equal as a value, other bits
    runs = {"a": _run("a", y=y), "b": _run("b", y=y.copy()), "c": _run("c", y=neg), "d": _run("d", y=neg.copy()),
            "e": _run("e", y=y.astype(np.float64)), "f": _run("f", y=np.asfortranarray(y.T).T.copy(order="F")),
            "g": _run("g", y=y, z=y)}
    assert twins_of(runs) == {"b": "a", "d": "c"}


def test_a_scratch_array_has_the_shape_asked_for_and_reuses_the_largest_buffer():
    scratch = Scratch()
    big = scratch.array("err", (4, 5))
    big[...] = 7.0
    small = scratch.array("err", (3,))
    assert small.shape == (3,) and small.flags.c_contiguous and np.shares_memory(big, small)
    assert scratch.array("other", (3,)).base is not small.base
    again = scratch.array("err", (30,))
    assert again.shape == (30,) and not np.shares_memory(again, big)
