"""Kernel A/B pieces that need no GPU: variant specs and the planted work factor's launch count."""
import pytest

from strata_bench.ab.kernel import _GraphArm, parse_variant
from strata_bench.errors import InputError


def test_variant_specs():
    assert parse_variant("new") == ("new", 1.0)
    assert parse_variant("new*1.03") == ("new", 1.03)
    for bad in ("new*", "new*9", "*1.03", "a b"):
        with pytest.raises(InputError):
            parse_variant(bad)


def test_planted_factor_is_not_rounded_to_whole_rotations(monkeypatch):
    captured = {}

    def fake_capture(family, case, variant, kernels, prep, total, stream):
        captured["total"] = total
        return object()

    monkeypatch.setattr("strata_bench.timing.graph.capture", fake_capture)

    class Prep:
        devs = [None] * 11  # 11 input copies, as for a 17 MB weight set on a 60 MiB L2

    class Stream:
        def __enter__(self): return self
        def __exit__(self, *a): return False

    arm = _GraphArm(None, None, "new", 1.03, None, Prep(), 143, Stream())
    assert captured["total"] == 147
    assert arm.factor == pytest.approx(1.03, abs=0.005)
