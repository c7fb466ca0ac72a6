"""checks/pieces.py: numpy's pairwise-sum pieces, their sums added back bit for bit, the pool."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from strata_bench.checks import pieces


@pytest.fixture(autouse=True)
def _cores_decide(monkeypatch):
    """The thread count from the (patched) core count, whatever this shell sets."""
    monkeypatch.delenv("STRATA_CHECK_THREADS", raising=False)


SMALL = [0, 1, 7, 128, 129, 1000, 65_536, 65_537, 200_003]


# Pieces of 1 and 7 elements split down to numpy's blocks of 128: the smaller arrays show that enough.
@pytest.mark.parametrize("n, piece", [(n, p) for n in SMALL for p in (1, 7)] +
                         [(n, p) for n in SMALL + [1 << 20, 2_500_001] for p in (4096, 1 << 16)])
def test_the_pieces_sums_add_up_to_np_sum_bit_for_bit(n, piece):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n) ** 2 * 10.0 ** rng.integers(-12, 12, n)  # magnitudes that expose any other order
    parts = pieces.leaves(n, piece)
    assert parts[0][0] == 0 and parts[-1][1] == n
    assert all(lo < hi or n == 0 for lo, hi in parts) and all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert all(hi - lo <= max(piece, pieces.BLOCK) for lo, hi in parts)
    assert pieces.tree_sum(n, piece, [np.sum(a[lo:hi]) for lo, hi in parts]) == np.sum(a)


def test_a_2d_array_in_c_order_sums_as_its_flat_pieces():
    a = np.random.default_rng(3).standard_normal((517, 1031)) * 1e6
    parts = pieces.leaves(a.size, 1 << 14)
    assert len(parts) > 1
    assert pieces.tree_sum(a.size, 1 << 14, [np.sum(a.ravel()[lo:hi]) for lo, hi in parts]) == np.sum(a)


def test_several_tasks_run_on_the_pool_and_come_back_in_order(monkeypatch):
    monkeypatch.setattr(pieces.os, "cpu_count", lambda: 4)
    names = pieces.run([lambda i=i: (i, threading.current_thread().name) for i in range(6)])
    assert [i for i, _ in names] == list(range(6))
    assert names[0][1] == threading.current_thread().name  # the caller runs the first, not waits
    assert all(name.startswith("strata-pieces") for _, name in names[1:])
    assert pieces.run([lambda: threading.current_thread().name]) == [threading.current_thread().name]


def test_one_core_runs_the_tasks_here(monkeypatch):
    monkeypatch.setattr(pieces.os, "cpu_count", lambda: 1)
    assert pieces.threads() == 1
    assert set(pieces.run([lambda: threading.current_thread().name] * 3)) == {threading.current_thread().name}


def test_threads_follow_the_cores_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(pieces.os, "cpu_count", lambda: 16)
    assert pieces.threads() == pieces.MAX_THREADS == 8
    monkeypatch.setattr(pieces.os, "cpu_count", lambda: None)
    assert pieces.threads() == 1


def test_scratch_is_reused_per_thread_and_grows(monkeypatch):
    monkeypatch.setattr(pieces.os, "cpu_count", lambda: 4)
    a = pieces.scratch(10)
    assert pieces.scratch(5).base is a.base and pieces.scratch(5).dtype == np.float64
    big = pieces.scratch(100)
    assert big.size == 100
    here, there = pieces.run([lambda: pieces.scratch(10)] * 2)  # the first runs here: this thread's
    assert here.base is big.base and there.base is not big.base


def test_a_forked_child_makes_its_own_pool():
    import os

    pieces.run([lambda: 0] * 2)  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: a pool of its own, or it would wait on threads it does not have
        os._exit(0 if pieces._pool is None and pieces.run([lambda: 1] * 2) == [1, 1] else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_the_variable_sets_the_thread_count(monkeypatch):
    monkeypatch.setattr(pieces.os, "cpu_count", lambda: 16)
    monkeypatch.setenv("STRATA_CHECK_THREADS", "1")
    assert pieces.threads() == 1
    assert set(pieces.run([lambda: threading.current_thread().name] * 3)) == {threading.current_thread().name}
    monkeypatch.setenv("STRATA_CHECK_THREADS", "12")
    assert pieces.threads() == 12
    monkeypatch.setenv("STRATA_CHECK_THREADS", "0")
    assert pieces.threads() == 8
