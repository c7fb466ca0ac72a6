"""Every check of check_case against results recorded from the comparison code before it was made faster
(29bae21): the same verdicts, numbers and diagnosis texts, for passing outputs and failing ones (1 ulp
off, a sign flipped, a NaN, denormals, one element out of its bound, an unwritten element, a column that
differs from the 1-column call), small and large (the large ones go through reused work arrays, and a
small case after a large one must not see the large one's values). Refresh the record only on purpose:
STRATA_RECORD_PARITY=1 writes it from the code under test."""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from strata_bench.cases import Case, Expected
from strata_bench.gpu.launch import VariantRun

RECORD = Path(__file__).parent / "data" / "parity_recorded.json"


class _Family:
    """Duck-typed family: outputs y (float32) and, in some cases, h (float16); N-column cases have a
    1-column case per column; the scenario's arrays are held by the case's `data` name."""

    def __init__(self, scenarios):
        self.scenarios = scenarios

    def make_inputs(self, case):
        return {"seed": case.data}

    def related_cases(self, case):
        if case.ncols == 1:
            return []
        return [(replace(case, ncols=1, params=(("col", j),)), "y", lambda o, j=j: o["y"][j:j + 1])
                for j in range(case.ncols)]

    def reference(self, case, host):
        return self.scenarios[case.data]["refs"]

    def device_inputs(self, case, host):
        return {}

    def written_mask(self, case, output):
        return None

    def allows_nonfinite(self, case, output):
        return self.scenarios[case.data].get("nonfinite", False)

    def compared_outputs(self, case):
        return None

    def errors_must_match(self, case):
        return False

    def output_values(self, case, name, outputs):
        return np.asarray(outputs[name], dtype=np.float64)

    def describe_index(self, case, output, index):
        return f"{output} row {index[0]}, column {index[-1]}"


def _outputs(y, h=None):
    return {"y": y} if h is None else {"y": y, "h": h}


def _scenarios():
    """name -> {refs, runs: variant -> (outputs, unwritten)}: generated from fixed seeds."""
    rng = np.random.default_rng(2033)
    out = {}

    def add(name, ref, tol, new, base=None, h=None, h_new=None, unwritten=None, **extra):
        base = ref.astype(np.float32) if base is None else base
        refs = [Expected("y", ref, tol=tol, why="recorded", label="f64")]
        if h is not None:
            refs.append(Expected("h", h.astype(np.float64), tol=1e-2, why="fp16", label="f64(h)"))
        runs = {"old": _outputs(base, h), "new": _outputs(new, h_new if h_new is not None else h),
                "same": _outputs(base.copy(), None if h is None else h.copy())}
        out[name] = {"refs": refs, "runs": runs, "unwritten": unwritten or {}, **extra}

    ref = rng.standard_normal((4, 300))
    own = np.abs(ref) * 1e-6 + 1e-7
    add("pass-own-bounds", ref, own, ref.astype(np.float32))
    big = rng.standard_normal((64, 40000)) * 3.0
    add("pass-large-scalar", big, 1e-5, big.astype(np.float32))
    big_own = np.abs(big) * 3e-8 + 1e-12  # about 2 in 5 elements out of their bound
    add("fail-large-own-bounds", big, big_own, big.astype(np.float32))
    ulp = ref.astype(np.float32)
    ulp[2, 17] = np.nextafter(ulp[2, 17], np.float32(np.inf))
    add("one-ulp-off", ref, own, ulp)
    flip = ref.astype(np.float32)
    flip[1, 5] = -flip[1, 5]
    add("sign-flip", ref, own, flip)
    nan = ref.astype(np.float32)
    nan[3, 299] = np.nan
    add("nan", ref, own, nan)
    tiny = rng.standard_normal((3, 64)) * 1e-40
    den = tiny.astype(np.float32)
    den[0, 3] = np.nextafter(den[0, 3], np.float32(0))
    den[2, 60] = np.float32(0.0)
    add("denormal", tiny, 1e-45, den)
    one = ref.astype(np.float32)
    one[0, 7] = np.float32(ref[0, 7] + 2 * own[0, 7])  # out of its own bound by one element, in every variant
    add("out-of-bound-by-one", ref, own, one.copy(), base=one)
    add("out-of-scalar-bound", ref, 1e-7, one.copy(), base=one)
    special = ref.copy()
    special[1, 1], special[2, 2] = np.inf, np.nan
    matched = special.astype(np.float32)
    mismatched = matched.copy()
    mismatched[1, 1] = -np.inf
    add("special-values", special, own, mismatched, base=matched, nonfinite=True)
    unw = np.zeros((4, 300), bool)
    unw[3, 4] = True
    add("unwritten", ref, own, ref.astype(np.float32), unwritten={"new": unw})
    zero = np.zeros((2, 40))
    nonzero = np.zeros((2, 40), np.float32)
    nonzero[1, 3] = 1e-30
    add("zero-reference-zero-bound", zero, 0.0, nonzero)
    add("empty", np.zeros((0, 4)), 1e-3, np.zeros((0, 4), np.float32))
    h = rng.standard_normal((4, 300)).astype(np.float16)
    h_new = h.copy()
    h_new[0, 0] = np.float16(-h_new[0, 0])
    add("fp16-output", ref, own, ref.astype(np.float32), h=h, h_new=h_new)
    add("small-after-large", ref[:2, :9], own[:2, :9], ref[:2, :9].astype(np.float32))
    cols = rng.standard_normal((3, 50))
    bad_col = cols.astype(np.float32)
    bad_col[1, 20] = np.nextafter(bad_col[1, 20], np.float32(-np.inf))
    add("columns", cols, 1e-6, bad_col, ncols=3, column_runs=cols.astype(np.float32))
    return out


def _run_all(monkeypatch, scenarios):
    from strata_bench.checks import parity

    def fake_run(family, case, variant, kernels, dev):
        sc = scenarios[case.data]
        col = case.param("col")
        if col is not None:  # the 1-column call: the base's column
            y = np.ascontiguousarray(sc["column_runs"][col:col + 1])
            return VariantRun(variant, {"y": y}, {"y": np.zeros(y.shape, bool)})
        outs = sc["runs"][variant]
        unwritten = {n: sc["unwritten"].get(variant, np.zeros(a.shape, bool)) if n == "y" else np.zeros(a.shape, bool)
                     for n, a in outs.items()}
        return VariantRun(variant, dict(outs), unwritten)

    monkeypatch.setattr(parity, "run_variant", fake_run)
    family, checker = _Family(scenarios), parity.CaseChecker()
    results = {}
    for name, sc in scenarios.items():
        case = Case("toy", "q8_0", rows=8, cols=32, ncols=sc.get("ncols", 1), data=name,
                    variants=("old", "new", "same"))
        results[name] = _record(checker(family, case, None, 0))
    return results


def _plain(value):
    """A field as exact JSON: floats by repr (NaN and inf included), tuples as lists."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _record(result):
    return {"status": result.status.value,
            "checks": [{k: _plain(v) for k, v in vars(c).items()} for c in result.checks]}


def test_every_check_equals_the_recorded_results_of_the_code_before(monkeypatch):
    got = _run_all(monkeypatch, _scenarios())
    if os.environ.get("STRATA_RECORD_PARITY") == "1":
        RECORD.parent.mkdir(exist_ok=True)
        RECORD.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(RECORD.read_text())
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name


def test_the_record_holds_failures_of_every_kind():
    """The record is not all passes: each failing scenario fails the check it is about."""
    want = json.loads(RECORD.read_text())
    failed = {name: {c["check"] for c in r["checks"] if not c["ok"]} for name, r in want.items()}
    assert failed["pass-own-bounds"] == set() and failed["pass-large-scalar"] == set()
    assert failed["one-ulp-off"] == {"bitwise"} and failed["sign-flip"] >= {"bitwise", "f64"}
    assert failed["nan"] >= {"finite", "bitwise", "f64"} and failed["denormal"] >= {"bitwise"}
    assert failed["out-of-bound-by-one"] == {"f64"} and failed["out-of-scalar-bound"] == {"f64"}
    assert failed["fail-large-own-bounds"] == {"f64"} and failed["unwritten"] == {"written"}
    assert failed["columns"] >= {"columns"} and failed["special-values"] >= {"f64"}
    assert failed["fp16-output"] == {"bitwise", "f64"} and failed["zero-reference-zero-bound"] >= {"f64"}
    ulp = next(c for c in want["one-ulp-off"]["checks"] if c["check"] == "bitwise" and not c["ok"])
    assert "1 of 1200 elements differ" in ulp["detail"] and "1 ulp" in ulp["detail"]


@pytest.mark.parametrize("name", ["one-ulp-off", "out-of-bound-by-one", "pass-large-scalar"])
def test_a_changed_output_changes_the_result(monkeypatch, name):
    """The comparison with the record can fail: the scenario with one element of every variant moved
    by one ulp does not give the recorded result."""
    scenarios = _scenarios()
    for outs in scenarios[name]["runs"].values():
        outs["y"][0, 7] = np.nextafter(outs["y"][0, 7], np.float32(np.inf))
    got = _run_all(monkeypatch, {name: scenarios[name]})
    assert got[name] != json.loads(RECORD.read_text())[name]
