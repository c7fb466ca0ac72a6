"""The BLAS thread count set at run time: one thread inside the block, the count before restored after
(also when the block raises), and the products computed inside equal to a one-thread process's."""
from __future__ import annotations

import pytest

from strata_bench.checks import blas, refcache


@pytest.fixture
def settable():
    if not blas.can_set():
        pytest.skip("no OpenBLAS whose thread count can be set here")


def test_one_thread_inside_and_the_count_restored_after(settable):
    before = blas.threads()
    with blas.one_thread() as done:
        assert done and blas.threads() == 1
    assert blas.threads() == before
    with pytest.raises(KeyError), blas.one_thread():
        raise KeyError("x")
    assert blas.threads() == before


def test_the_references_are_computed_under_the_workers_settings_where_they_can_be_set(settable):
    assert refcache.compute_settings() == refcache.single_thread_blas()


def test_without_a_settable_blas_nothing_is_set(monkeypatch):
    monkeypatch.setattr(blas, "_openblas", lambda: None)
    assert not blas.can_set() and blas.threads() is None
    with blas.one_thread() as done:
        assert done is False
    assert refcache.compute_settings() == refcache.blas_threads()
