"""The reference pool: entries its worker processes store are the serial path's references bit for bit,
and so is every check computed from them; the loop waits for a case's worker on a miss; a pool that
cannot start says so once and the loop computes every reference itself; nothing runs with the cache off
or for a user family."""
from __future__ import annotations

import math

import numpy as np
import pytest

from strata_bench.cases import load_builtin_families
from strata_bench.checks import refcache
from strata_bench.checks.parity import _error_equal_checks, _reference_checks
from strata_bench.checks.refpool import ReferencePool

from tests.checks.test_refcache import _default_case, _runs_from

# Small default cases: a real-weights one, an edge one and two seeded ones, over three families.
SPECS = [("mmvq", "q8_0", 64, 1536, 3, "fixture:smollm2-ffn_down.q8_0"), ("mmvq", "iq2_xxs", 512, 2560, 4, "edge:2"),
         ("q2warp", "q2_0", 12288, 2560, 1, "seed:1"), ("fp16deq", "q8_0", 96, 4096, 1, "seed:1")]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("STRATA_REF_CACHE", raising=False)
    return tmp_path / "references"


def _fields(check):
    return tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in vars(check).values())


def _cases():
    found = []
    for spec in SPECS:
        try:
            found.append(_default_case(*spec))
        except pytest.skip.Exception:
            continue
    if not found:
        pytest.skip("none of the cases is a default case here")
    return found


def test_pooled_entries_give_the_serial_checks_bit_for_bit(cache):
    pairs = _cases()
    families = load_builtin_families()
    notes = []
    with ReferencePool([c for _, c in pairs], families, workers=2, warn=notes.append) as pool:
        assert pool.workers == 2
        for family, case in pairs:
            pool.wait(case)
            host = family.make_inputs(case)
            assert refcache.entry_path(refcache.reference_key(case, host)).exists(), case.name
    assert notes == [] and pool.seconds is not None and pool.seconds > 0
    for family, case in pairs:
        host = family.make_inputs(case)
        serial = tuple(family.reference(case, host))
        pooled = refcache.cached_references(family, case, host, compute=lambda: pytest.fail("recomputed"))
        assert len(pooled) == len(serial)
        for got, want in zip(pooled, serial):
            assert (got.output, got.tol, got.why, got.label) == (want.output, want.tol, want.why, want.label)
            assert np.asarray(got.ref).dtype == np.asarray(want.ref).dtype
            assert np.asarray(got.ref).tobytes() == np.asarray(want.ref).tobytes()
        runs = _runs_from(serial, 0)
        want = _reference_checks(family, case, runs, serial)
        want += _error_equal_checks(family, case, want)
        got = _reference_checks(family, case, runs, pooled)
        got += _error_equal_checks(family, case, got)
        assert [_fields(c) for c in got] == [_fields(c) for c in want]


def test_a_miss_waits_for_the_worker_instead_of_computing(cache):
    family, case = _cases()[0]
    host = family.make_inputs(case)
    with ReferencePool([case], load_builtin_families(), workers=1) as pool:
        refs = refcache.cached_references(family, case, host, compute=lambda: pytest.fail("computed in the loop"),
                                          on_miss=lambda: pool.wait(case))
    assert [e.output for e in refs] == [e.output for e in family.reference(case, host)]


def test_a_pool_that_cannot_start_notes_once_and_the_loop_computes(cache):
    pairs = _cases()[:2]
    notes = []
    pool = ReferencePool([c for _, c in pairs], load_builtin_families(), workers=2, warn=notes.append,
                         start_method="no-such-method")
    for family, case in pairs:
        pool.wait(case)
        pool.wait(case)
        host = family.make_inputs(case)
        computed = []
        refs = refcache.cached_references(family, case, host, on_miss=lambda: pool.wait(case),
                                          compute=lambda: computed.append(1) or family.reference(case, host))
        assert computed == [1] and len(refs) == len(family.reference(case, host))
    assert pool.workers == 0 and pool.seconds is None
    assert len(notes) == 1 and notes[0].startswith("note: reference pool failed (ValueError:")
    assert notes[0].endswith("computing references in the loop instead")


def test_no_workers_with_the_cache_off_or_for_a_user_family(cache, monkeypatch, toy_family, toy_case):
    family, case = _cases()[0]
    monkeypatch.setenv("STRATA_REF_CACHE", "off")
    assert ReferencePool([case], load_builtin_families(), workers=2).workers == 0
    monkeypatch.delenv("STRATA_REF_CACHE")
    assert ReferencePool([toy_case], {"toy": toy_family}, workers=2).workers == 0
    assert not list(cache.rglob("*.npz"))


@pytest.mark.gpu
def test_gpu_pooled_cold_run_has_the_serial_records_and_a_pool_line(tmp_path, monkeypatch):
    """On the GPU: a cold cached run (references from the pool's workers) writes the same records as a
    run with the cache off (serial references, no pool), and --profile shows the pool's line."""
    import json

    from click.testing import CliRunner

    from strata_bench.cli.main import cli

    monkeypatch.setenv("STRATA_CACHE_DIR", str(tmp_path / "cache"))
    records, stderr = {}, {}
    for switch in ("off", "on"):
        monkeypatch.setenv("STRATA_REF_CACHE", switch)
        result = CliRunner().invoke(cli, ["parity", "--family", "mmvq,grouped,pfgemm", "--format", "q8_0,iq2_xxs",
                                          "--results", str(tmp_path / switch), "-q", "--profile"])
        assert result.exit_code == 0, result.output
        (path,) = list((tmp_path / switch).rglob("parity-*.jsonl"))
        records[switch] = {r["case"]: (r["status"], r["checks"]) for r in map(json.loads, path.read_text().splitlines())}
        stderr[switch] = result.stderr
    assert records["on"] == records["off"] and len(records["on"]) > 10
    assert "references (pool)" in stderr["on"] and "references (pool)" not in stderr["off"]
    assert "reference pool failed" not in stderr["on"]


def test_a_broken_pool_notes_once_and_stops_while_a_case_error_is_left_to_the_loop(cache):
    import concurrent.futures as cf
    from concurrent.futures.process import BrokenProcessPool

    pairs = _cases()[:1]
    notes = []
    pool = ReferencePool([c for _, c in pairs], load_builtin_families(), workers=1, warn=notes.append)
    case = pairs[0][1]
    pool.wait(case)
    failed = cf.Future()
    failed.set_exception(KeyError("in make_inputs"))
    pool._futures[case] = failed
    pool.wait(case)  # this case's own error: silent (the loop computes it and meets the error itself)
    assert notes == [] and pool._executor is not None
    broken = cf.Future()
    broken.set_exception(BrokenProcessPool("a worker died"))
    pool._futures[case] = broken
    pool.wait(case)
    pool.wait(case)
    assert notes == ["note: reference pool failed (BrokenProcessPool: a worker died); computing references "
                     "in the loop instead"]
    assert pool._executor is None


def test_worker_count_follows_the_cores_and_the_override(monkeypatch):
    from strata_bench.checks import refpool

    monkeypatch.delenv("STRATA_REF_WORKERS", raising=False)
    monkeypatch.setattr(refpool.os, "cpu_count", lambda: 16)
    assert refpool.default_workers() == 4  # capped: each worker's BLAS is multi-threaded
    monkeypatch.setattr(refpool.os, "cpu_count", lambda: 2)
    assert refpool.default_workers() == 1  # one core stays with the loop
    monkeypatch.setattr(refpool.os, "cpu_count", lambda: 16)
    monkeypatch.setenv("STRATA_REF_WORKERS", "4")
    assert refpool.default_workers() == 4
    monkeypatch.setenv("STRATA_REF_WORKERS", "0")
    assert refpool.default_workers() == 0
    monkeypatch.setenv("STRATA_REF_WORKERS", "many")  # not a count: the default
    assert refpool.default_workers() == 4
