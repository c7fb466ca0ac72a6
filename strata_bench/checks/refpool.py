"""Compute the missing reference-cache entries ahead of the case loop, in worker processes: a cold parity
run spends most of its time in float64 references, which are pure functions of the case's inputs, and
the loop runs on one core.

Each worker (a fresh 'spawn' process, so no CuPy or CUDA state is inherited) loads the built-in families,
makes the case's inputs and stores the entry through refcache (the same key, the same atomic write);
the loop then reads it as in a warm run. Where an entry is missing when the loop reaches its case, the
loop waits for that case's worker; where the worker failed (or the pool could not start) the loop
computes the reference itself, as without a pool: a failure costs only the speed-up and one note on
stderr. Cases whose entry is already there (refcache.probably_cached: a warm run) start no worker.

Workers: one per core less one for the loop, at most MAX_WORKERS ($STRATA_REF_WORKERS overrides, 0 turns
the pool off). Each worker's BLAS runs one thread (refcache.SINGLE_THREAD is in its environment before
its numpy loads): with the parent's multi-threaded BLAS, 15 workers oversubscribed the H200 host's 16
cores (cold parity 48.7 s, against 37.9 s with 4). The thread count changes the last bits of some
references (27 of the default matrix's 905 differ between 1 and 2 OpenBLAS threads), so the entries are
keyed by the workers' settings (refcache.single_thread_blas()), and the loop looks them up under those
(`ReferencePool.blas`); a reference the loop computes itself is keyed by its own. A process started with
those settings (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1) computes the workers' values.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import sys
import time
from dataclasses import replace
from typing import Any, Callable

from strata_bench.cases import Case, Family
from strata_bench.checks import pieces, refcache


def _fill(case: Case, family_type: str, folder: str) -> bool:
    """In a worker: store the entry of `case` in the parent's cache folder (named here: a forkserver keeps
    the environment it started with) unless one exists; False where the family is not the one the parent
    meant (a variant or user family under a built-in name) or the entry cannot be stored."""
    from strata_bench.families import load_builtin_families

    os.environ["STRATA_CACHE_DIR"] = folder
    os.environ["STRATA_REF_CACHE"] = "on"
    family = load_builtin_families().get(case.family)
    if family is None or _type_name(family) != family_type:
        return False
    host = family.make_inputs(case)
    key = refcache.reference_key(case, host)
    if key is None:
        return False
    if refcache.entry_path(key).exists():
        refcache.mark(case, None, key)
        return True
    refcache.cached_references(family, case, host)
    return refcache.entry_path(key).exists()


def _fill_all(cases: list[Case], family_type: str, folder: str) -> list[bool]:
    """_fill for each of `cases` in turn (siblings(): one family), in one worker; a case that raises
    is left for the loop, which computes it and meets its error, as a case of its own would be."""
    done = []
    for case in cases:
        try:
            done.append(_fill(case, family_type, folder))
        except Exception:  # noqa: BLE001 - the loop computes this one itself
            done.append(False)
    return done


def siblings(cases: list[Case]) -> list[list[Case]]:
    """`cases` grouped by all but their column count, in the order of each group's first case. A built-in
    family caches what its references need per format, shape and data (mmvq's float64 products of all
    its columns: 6.8 s of one core for iq2_xxs 131072x1024), so one worker computing a group one case
    after another makes that once, where a worker per case made it once in each (the default matrix's
    482 cases are 219 groups)."""
    groups: dict[Case, list[Case]] = {}
    for case in cases:
        groups.setdefault(replace(case, ncols=1), []).append(case)
    return list(groups.values())


MAX_WORKERS = 15


def default_workers() -> int:
    """$STRATA_REF_WORKERS (0: no pool), else one per core less the loop's, at most MAX_WORKERS."""
    text = os.environ.get("STRATA_REF_WORKERS", "").strip()
    if text.isdigit():
        return int(text)
    return max(0, min(MAX_WORKERS, (os.cpu_count() or 1) - 1))


def _type_name(family: Family) -> str:
    return f"{type(family).__module__}.{type(family).__qualname__}"


def _start_method() -> str:
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


class ReferencePool:
    """Workers filling the cache for `cases` (built-in families only; nothing when the cache is off).
    `wait(case)` is called by the loop on a cache miss; `close()` stops the workers."""

    def __init__(self, cases: list[Case], families: dict[str, Family], workers: int | None = None,
                 warn: Callable[[str], None] | None = None, start_method: str | None = None):
        self._warn = warn or (lambda text: print(text, file=sys.stderr))
        self._warned = False
        self._futures: dict[Case, cf.Future] = {}
        self._executor: cf.ProcessPoolExecutor | None = None
        self.started = time.perf_counter()
        self.finished: float | None = None
        wanted = [c for c in dict.fromkeys(cases)
                  if c.family in families and refcache._builtin(families[c.family])] if refcache.enabled() else []
        count = workers if workers is not None else default_workers()
        if count < 1:
            return
        self.blas = refcache.single_thread_blas()
        # Cases whose entry is there already (a warm run) start no worker: a worker would make their inputs
        # only to find the entry.
        groups = siblings([c for c in wanted if not refcache.probably_cached(c, self.blas)])
        count = min(count, len(groups))
        if count < 1:
            return
        # One thread each for their BLAS and for the reference statistics they store (checks/pieces.py).
        single = {**refcache.SINGLE_THREAD, pieces.THREADS_VARIABLE: "1"}
        saved = {name: os.environ.get(name) for name in single}
        os.environ.update(single)  # inherited by the workers (and a forkserver) they start
        try:
            folder = str(refcache.cache_dir().parent)
            context = multiprocessing.get_context(start_method or _start_method())
            if context.get_start_method() == "forkserver":  # workers fork from a server with numpy imported
                context.set_forkserver_preload([__name__])
            self._executor = cf.ProcessPoolExecutor(count, mp_context=context)
            for group in groups:  # in loop order: the first cases are ready first
                future = self._executor.submit(_fill_all, group, _type_name(families[group[0].family]), folder)
                future.add_done_callback(self._note_done)
                self._futures.update(dict.fromkeys(group, future))
            self._submitted = True
            self.workers = count
        except Exception as exc:  # noqa: BLE001 - any failure to start leaves the serial path
            self._fail(exc)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    workers = 0
    blas: tuple | None = None  # the BLAS settings the entries are keyed by (None: no pool was meant)
    _submitted = False  # the done-callbacks (another thread) read _futures only once it is whole

    def _note_done(self, _future: cf.Future) -> None:
        if self._submitted and self.finished is None and all(f.done() for f in self._futures.values()):
            self.finished = time.perf_counter()

    def _fail(self, exc: BaseException) -> None:
        if not self._warned:
            self._warned = True
            self._warn(f"note: reference pool failed ({type(exc).__name__}: {exc}); computing references "
                       "in the loop instead")
        self.close()

    def wait(self, case: Case) -> None:
        """Return once the worker for `case` is done (or failed; the caller then computes it)."""
        future = self._futures.get(case)
        if future is None or self._executor is None:
            return
        try:
            future.result()
        except cf.BrokenExecutor as exc:  # a worker died (or could not start): the loop computes the rest
            self._fail(exc)
        except Exception:  # noqa: BLE001 - this case's error: the loop computes it and meets it itself
            pass

    @property
    def seconds(self) -> float | None:
        """Wall seconds from the pool's start until its last case was done (None: none ran, or not done)."""
        if self._submitted and self.finished is None and all(f.done() for f in self._futures.values()):
            self.finished = time.perf_counter()  # the last done-callback may not have run yet
        return None if self.finished is None or not self._futures else self.finished - self.started

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> "ReferencePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
