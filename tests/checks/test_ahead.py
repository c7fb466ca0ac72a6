"""checks/ahead.py: the cases' inputs and cache lookups made on one thread ahead of the loop, with the same
results as made in the loop; as far ahead as the byte budget lets it; what a device's fault passed over let go; an input error met when its case is reached; a missing reference
computed in the loop, never on the thread; a user family's made in the loop."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from strata_bench.cases import Case, Expected
from strata_bench.checks import parity, refcache
from strata_bench.checks.ahead import Ahead
from strata_bench.checks.phases import PhaseTimes
from strata_bench.gpu.launch import VariantRun
from tests.checks.conftest import _ToyFamily


class _Seeded(_ToyFamily):
    """Inputs drawn from the case's seed (large enough for numpy to release the GIL), a reference over them,
    and which thread made each."""

    def __init__(self):
        self.threads: dict[str, list[str]] = {"inputs": [], "reference": []}
        self.made: list[Case] = []

    def make_inputs(self, case):
        self.threads["inputs"].append(threading.current_thread().name)
        self.made.append(case)
        if case.param("bad"):
            raise ValueError(f"bad inputs for {case.name}")
        return {"x": _draw(case)}

    def reference(self, case, host):
        self.threads["reference"].append(threading.current_thread().name)
        return [Expected("y", host["x"][:, :8].astype(np.float64), 1e-3, "toy", "f64")]


def _draw(case):
    return np.random.default_rng(case.rows).standard_normal((4, 1 << 14), dtype=np.float32)


def _fake_run(family, case, variant, kernels, dev):
    y = _draw(case)[:, :8].copy()
    return VariantRun(variant, {"y": y}, {"y": np.zeros(y.shape, bool)})


@pytest.fixture(autouse=True)
def cached(monkeypatch, cache):
    """The toy family's references go through the cache (a built-in family's do), the launches are faked."""
    monkeypatch.setattr(refcache, "_builtin", lambda family: True)
    monkeypatch.setattr(parity, "run_variant", _fake_run)


@pytest.fixture
def cases():
    return [Case("toy", "q8_0", rows, 32, variants=("a", "b")) for rows in (8, 16, 24, 32)]


def _loop(family, cases, ahead=None):
    checker = parity.CaseChecker(PhaseTimes(), ahead=ahead)
    return [checker(family, c, None, 0) for c in cases]


def test_made_ahead_on_one_thread_with_the_loops_results(cases):
    inline, threaded = _Seeded(), _Seeded()
    expected = _loop(inline, cases)  # fills the cache: the second loop finds every reference
    with Ahead(cases, {"toy": threaded}) as ahead:
        got = _loop(threaded, cases, ahead)
    assert [r.checks for r in got] == [r.checks for r in expected]
    assert all(r.status.value == "PASS" for r in got)
    assert threaded.threads["inputs"] == ["strata-ahead"] * len(cases) and threaded.threads["reference"] == []
    assert ahead.seconds["inputs"] > 0 and ahead.seconds["references"] > 0


def test_a_missing_reference_is_computed_in_the_loop(cases):
    family = _Seeded()
    with Ahead(cases, {"toy": family}) as ahead:
        _loop(family, cases, ahead)
    assert family.threads["reference"] == [threading.current_thread().name] * len(cases)


def test_an_input_error_is_raised_when_its_case_is_reached(cases):
    bad = Case("toy", "q8_0", 40, 32, variants=("a", "b"), params=(("bad", 1),))
    family = _Seeded()
    with Ahead([cases[0], bad], {"toy": family}) as ahead:
        checker = parity.CaseChecker(ahead=ahead)
        assert checker(family, cases[0], None, 0).status.value == "PASS"  # bad's inputs failed meanwhile
        with pytest.raises(ValueError, match="bad inputs"):
            checker(family, bad, None, 0)


def test_another_family_under_the_name_is_made_in_the_loop(cases):
    listed, other = _Seeded(), _Seeded()
    with Ahead(cases, {"toy": listed}) as ahead:
        _loop(other, cases, ahead)
    assert other.threads["inputs"] and not any(n.startswith("strata-ahead") for n in other.threads["inputs"])


def test_a_user_family_is_made_in_the_loop(monkeypatch, cases):
    monkeypatch.setattr(refcache, "_builtin", lambda family: False)
    family = _Seeded()
    with Ahead(cases, {"toy": family}) as ahead:
        _loop(family, cases, ahead)
    assert family.threads["inputs"] and not any(n.startswith("strata-ahead") for n in family.threads["inputs"])


def test_each_case_is_made_by_its_own_family(cases):
    families = {"toy": _Seeded(), "toy2": _Seeded()}
    mixed = [c if i % 2 else Case("toy2", c.fmt, c.rows, c.cols, variants=c.variants) for i, c in enumerate(cases)]
    with Ahead(mixed, families) as ahead:
        checker = parity.CaseChecker(ahead=ahead)
        assert all(checker(families[c.family], c, None, 0).status.value == "PASS" for c in mixed)
    for name, family in families.items():
        assert family.made and all(c.family == name for c in family.made)


def test_the_thread_stays_within_its_budget_and_lets_go_of_passed_cases(cases):
    family = _Seeded()
    one_case = 4 * (1 << 14) * 4  # each case's inputs: 4 x 16384 float32
    with Ahead(cases, {"toy": family}, budget=2 * one_case) as ahead:
        checker = parity.CaseChecker(ahead=ahead)
        checker(family, cases[0], None, 0)
        with ahead._changed:  # cases 1 and 2 made, then it waits for the loop
            ahead._changed.wait_for(lambda: ahead._held >= 2 * one_case)
        assert len(family.made) == 3 and ahead._held == 2 * one_case
        checker(family, cases[3], None, 0)  # a fault passed over 1 and 2: let go, and 3 made for the loop
        assert ahead._held == 0 and len(family.made) == 4
        checker(family, cases[1], None, 0)  # the next device's pass: made in the loop
    assert family.threads["inputs"][-1] == threading.current_thread().name
