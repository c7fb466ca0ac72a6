"""The reference pool: entries its worker processes store are the serial path's references bit for bit,
and so is every check computed from them; the loop waits for a case's worker on a miss; a pool that
cannot start says so once and the loop computes every reference itself; nothing runs with the cache off
or for a user family."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from strata_bench.families import load_builtin_families
from strata_bench.checks import blas, refcache
from strata_bench.checks.parity import _error_equal_checks, _reference_checks
from strata_bench.checks.refpool import ReferencePool, siblings

from tests.checks.test_refcache import CASES, _default_case, _runs_from

def _fields(check):
    return tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in vars(check).values())


def _cases():
    return [_default_case(*spec) for spec in CASES]  # fails naming a case that is no longer a default one


def test_pooled_entries_give_the_serial_checks_bit_for_bit(cache):
    pairs = _cases()
    families = load_builtin_families()
    notes = []
    with ReferencePool([c for _, c in pairs], families, workers=2, warn=notes.append) as pool:
        assert pool.workers == 2
        for family, case in pairs:
            pool.wait(case)
            host = family.make_inputs(case)
            assert refcache.entry_path(refcache.reference_key(case, host, pool.blas)).exists(), case.name
    assert notes == [] and pool.seconds is not None and pool.seconds > 0
    assert pool.blas == refcache.single_thread_blas()
    for family, case in pairs:
        host = family.make_inputs(case)
        with blas.one_thread():  # as the loop computes a reference itself (the pool's workers have one thread)
            serial = tuple(family.reference(case, host))
        pooled = refcache.cached_references(family, case, host, compute=lambda: pytest.fail("recomputed"),
                                            blas=pool.blas)
        assert len(pooled) == len(serial)
        for got, want in zip(pooled, serial):
            assert (got.output, got.why, got.label) == (want.output, want.why, want.label)
            assert np.asarray(got.tol).dtype == np.asarray(want.tol).dtype  # a float, or per-element bounds
            assert np.asarray(got.tol).tobytes() == np.asarray(want.tol).tobytes()
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
                                          on_miss=lambda: pool.wait(case), blas=pool.blas)
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
    assert not list(cache.rglob("*.ref"))


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
    assert refpool.default_workers() == 15  # one BLAS thread each: one per core, the loop's left
    monkeypatch.setattr(refpool.os, "cpu_count", lambda: 64)
    assert refpool.default_workers() == refpool.MAX_WORKERS == 15
    monkeypatch.setattr(refpool.os, "cpu_count", lambda: 2)
    assert refpool.default_workers() == 1  # one core stays with the loop
    monkeypatch.setattr(refpool.os, "cpu_count", lambda: 16)
    monkeypatch.setenv("STRATA_REF_WORKERS", "4")
    assert refpool.default_workers() == 4
    monkeypatch.setenv("STRATA_REF_WORKERS", "0")
    assert refpool.default_workers() == 0
    monkeypatch.setenv("STRATA_REF_WORKERS", "many")  # not a count: the default
    assert refpool.default_workers() == 15


_SERIAL_ONE_THREAD = """
import hashlib, sys
from strata_bench.families import load_builtin_families
family = load_builtin_families()["q2warp"]
case = next(c for c in family.default_cases() if c.name == sys.argv[1])
for e in family.reference(case, family.make_inputs(case)):
    print(e.label, hashlib.sha256(e.ref.tobytes()).hexdigest())
"""


def test_pooled_entries_are_the_single_thread_serial_references_where_threads_change_bits(cache, monkeypatch):
    """q2warp 1001x2496 n3's raw-activation reference has other last bits under 1 OpenBLAS thread than under
    2 (and 16): the workers' entries are the one-thread serial values, keyed as such, and the parent's
    environment is as it was once the pool has started."""
    import os
    import subprocess
    import sys
    from hashlib import sha256
    from pathlib import Path

    family, case = _default_case("q2warp", "q2_0", 1001, 2496, 3, "seed:2")
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with ReferencePool([case], load_builtin_families(), workers=1) as pool:
        assert os.environ["OMP_NUM_THREADS"] == "7" and "OPENBLAS_NUM_THREADS" not in os.environ
        assert "STRATA_CHECK_THREADS" not in os.environ
        pool.wait(case)
    host = family.make_inputs(case)
    own = refcache.blas_threads()  # the parent's (two or more threads here)
    assert not refcache.entry_path(refcache.reference_key(case, host, own)).exists()  # not under the parent's
    pooled = refcache.cached_references(family, case, host, compute=lambda: pytest.fail("recomputed"),
                                        blas=pool.blas)
    env = {**os.environ, **refcache.SINGLE_THREAD, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", _SERIAL_ONE_THREAD, case.name], env=env, capture_output=True,
                         text=True, check=True).stdout.split("\n")
    assert [f"{e.label} {sha256(e.ref.tobytes()).hexdigest()}" for e in pooled] == [line for line in out if line]


def test_a_reference_the_loop_computes_is_keyed_by_its_own_settings(cache, monkeypatch):
    """Where this process cannot set its BLAS to one thread: looked up under the workers' settings,
    missed, computed here: stored under this process's key (its values are this process's BLAS's), and
    found there the next time."""
    family, case = _cases()[0]
    host = family.make_inputs(case)
    single = refcache.single_thread_blas()
    if single == refcache.blas_threads():
        pytest.skip("this process already runs one BLAS thread")
    monkeypatch.setattr(refcache, "compute_settings", refcache.blas_threads)  # no run-time control
    computed = []
    first = refcache.cached_references(family, case, host, blas=single,
                                       compute=lambda: computed.append(1) or family.reference(case, host))
    assert computed == [1]
    assert refcache.entry_path(refcache.reference_key(case, host)).exists()
    assert not refcache.entry_path(refcache.reference_key(case, host, single)).exists()
    again = refcache.cached_references(family, case, host, blas=single, compute=lambda: pytest.fail("recomputed"))
    assert [e.ref.tobytes() for e in again] == [e.ref.tobytes() for e in first]


def test_the_loop_computes_the_workers_bits_with_one_thread_set_at_run_time(cache, monkeypatch):
    """With the cache off (no pool), the loop's references of the thread-sensitive case are the one-thread
    values a worker stores: the same bits cached or not, pooled or not."""
    from strata_bench.checks import blas

    if not blas.can_set():
        pytest.skip("no OpenBLAS whose thread count can be set here")
    family, case = _default_case("q2warp", "q2_0", 1001, 2496, 3, "seed:2")
    with ReferencePool([case], load_builtin_families(), workers=1) as pool:
        pool.wait(case)
    host = family.make_inputs(case)
    pooled = refcache.cached_references(family, case, host, compute=lambda: pytest.fail("recomputed"),
                                        blas=pool.blas)
    monkeypatch.setenv("STRATA_REF_CACHE", "off")
    before = blas.threads()
    serial = refcache.cached_references(family, case, host)
    assert blas.threads() == before
    assert [e.ref.tobytes() for e in serial] == [e.ref.tobytes() for e in pooled]
    with blas.one_thread() as done:
        assert done and blas.threads() == 1
    assert blas.threads() == before


def test_a_warm_run_starts_no_worker_and_a_lost_entry_is_filled_again(cache):
    pairs = _cases()[:2]
    cases = [c for _, c in pairs]
    with ReferencePool(cases, load_builtin_families(), workers=2) as pool:
        for case in cases:
            pool.wait(case)
    assert pool.workers == 2
    assert all(refcache.probably_cached(c, pool.blas) for c in cases)
    with ReferencePool(cases, load_builtin_families(), workers=2) as warm:
        assert warm.workers == 0 and warm.blas == pool.blas  # every entry there: nothing started
    family, case = pairs[0]
    refcache.entry_path(refcache.reference_key(case, family.make_inputs(case), pool.blas)).unlink()
    assert not refcache.probably_cached(case, pool.blas) and refcache.probably_cached(cases[1], pool.blas)
    with ReferencePool(cases, load_builtin_families(), workers=2) as again:
        assert again.workers == 1
        again.wait(case)
    assert refcache.probably_cached(case, pool.blas)


def test_a_worker_computes_the_statistics_it_stores_on_its_own_thread(cache, monkeypatch):
    """Workers run one per core: the statistics stored with their entries take no pieces' threads."""
    import os

    monkeypatch.delenv("STRATA_CHECK_THREADS", raising=False)
    family, case = _cases()[0]
    with ReferencePool([case], load_builtin_families(), workers=1) as pool:
        assert pool._executor.submit(_piece_threads).result() == ("1", 1)
        pool.wait(case)
    assert "STRATA_CHECK_THREADS" not in os.environ


def _piece_threads():
    """In a worker: its STRATA_CHECK_THREADS and the pieces' thread count."""
    import os

    from strata_bench.checks import pieces

    return os.environ.get("STRATA_CHECK_THREADS"), pieces.threads()


def test_cases_differing_only_in_columns_go_to_one_worker_in_order(cache):
    """Siblings (all but ncols equal) are one task: the worker makes their shared products once; every
    entry is still stored, and the other cases are tasks of their own."""
    family, case = _cases()[0]
    others = [replace(case, ncols=n) for n in (1, 2, 5) if n != case.ncols]
    stranger = _cases()[1][1]
    assert siblings([case, stranger, *others]) == [[case, *others], [stranger]]
    with ReferencePool([case, stranger, *others], load_builtin_families(), workers=2) as pool:
        assert pool.workers == 2
        assert {id(pool._futures[c]) for c in (case, *others)} == {id(pool._futures[case])}
        assert pool._futures[stranger] is not pool._futures[case]
        assert pool._futures[case].result() == [True] * (1 + len(others))
    for c in (case, *others):
        assert refcache.probably_cached(c, pool.blas)
