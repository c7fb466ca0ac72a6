"""A pass over a large flat array a piece at a time, the pieces on a few threads, with sums that keep
numpy's order.

A piece's temporaries stay in a core's cache (no array of the whole size is made and faulted in), and
numpy releases the GIL over a piece, so the pieces of one array run on several cores at once. The pieces
are the leaves of numpy's own pairwise sum (np.add.reduce over a contiguous float64 array halves it, a
multiple of 8 to the left, down to blocks of 128), and their sums are added back up that same tree:
the total is np.sum's, bit for bit (tests/checks/test_pieces.py holds it against np.sum), so a check's
numbers do not depend on the piece size or on how many threads ran.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence, TypeVar

import numpy as np

T = TypeVar("T")

# Elements per piece at most: a piece's temporaries stay in a core's cache.
PIECE = 1 << 16
# numpy's pairwise sum adds up to this many elements in one block (PW_BLOCKSIZE) before it halves.
BLOCK = 128
# Threads at most: comparisons are memory-bound, and the loop's other threads (inputs made ahead, the
# reference workers of a cold run) need cores too.
MAX_THREADS = 8
# Sets the thread count (1: every piece on the calling thread); refpool's workers, one per core, set 1.
THREADS_VARIABLE = "STRATA_CHECK_THREADS"

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_scratch = threading.local()


def _halves(n: int) -> int:
    """Where numpy's pairwise sum splits n elements: half, rounded down to a multiple of 8."""
    half = n // 2
    return half - half % 8


def leaves(n: int, piece: int) -> list[tuple[int, int]]:
    """The (start, stop) pieces of n elements: numpy's pairwise-sum tree, split down to `piece` elements
    (or one block of 128) at most; one empty piece for n == 0."""
    if n <= max(piece, BLOCK):
        return [(0, n)]
    left = _halves(n)
    return leaves(left, piece) + [(left + lo, left + hi) for lo, hi in leaves(n - left, piece)]


def tree_sum(n: int, piece: int, sums: Sequence[float]) -> float:
    """The pieces' sums (of leaves(n, piece), in order) added up numpy's pairwise tree: np.sum's total."""
    def add(size: int, each: Iterator[float]) -> float:
        if size <= max(piece, BLOCK):
            return float(next(each))
        left = add(_halves(size), each)
        return left + add(size - _halves(size), each)

    return add(n, iter(sums))


def result_axes(*arrays: np.ndarray) -> tuple[int, ...]:
    """The axes, outermost first, of the layout numpy gives a result over `arrays` (their common order
    where they agree, else C order): a sum over such a result runs in memory order, so pieces read flat
    in this order (flat()) keep its order (a transposed array sums as it would)."""
    if all(a.flags.c_contiguous for a in arrays):
        return tuple(range(arrays[0].ndim))
    ops = [["readonly"]] * len(arrays) + [["writeonly", "allocate"]]
    out = np.nditer([*arrays, None], flags=["zerosize_ok"], op_flags=ops).operands[-1]  # np.empty: not touched
    return tuple(sorted(range(out.ndim), key=lambda axis: -out.strides[axis]))


def flat(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """`a` read flat with `axes` outermost (a view where it is laid out so, else a copy)."""
    return np.ravel(a.transpose(axes))


def scratch(size: int) -> np.ndarray:
    """A float64 work array of `size` elements, this thread's own (reused: a new one per piece would be
    faulted in every time)."""
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.size < size:
        buf = _scratch.buf = np.empty(max(size, 1))
    return buf[:size]


def threads() -> int:
    """$STRATA_CHECK_THREADS, else one per core, MAX_THREADS at most (the results are the same whatever
    the count)."""
    text = os.environ.get(THREADS_VARIABLE, "").strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    return max(1, min(os.cpu_count() or 1, MAX_THREADS))


def run(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Each task's result, in order: the first runs here, the others on the shared pool (all here where
    there is one task or one thread), so the caller works rather than waits."""
    if len(tasks) <= 1 or threads() == 1:
        return [task() for task in tasks]
    pool = _shared_pool()
    others = [pool.submit(task) for task in tasks[1:]]
    first = tasks[0]()
    return [first, *(future.result() for future in others)]


def _forget_pool() -> None:
    global _pool
    _pool = None


# A forked child has none of its parent's threads: a pool it inherited would wait on them forever.
os.register_at_fork(after_in_child=_forget_pool)


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=threads(), thread_name_prefix="strata-pieces")
        return _pool
