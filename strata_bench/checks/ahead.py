"""The host side of the parity loop's cases (their inputs, related cases and the reference cache's
lookup) made ahead of the loop on one thread, in loop order, while the loop launches and compares.

A warm `parity` over the default cases spent 3.6 s of the H100 host's 12.6 s on this: numpy's random
fills making the inputs and sha256 over them finding the cached references. Both release the GIL for
large arrays (numpy's Generator fills, hashlib over 2 KiB), so on a many-core host the thread's work
hides behind the loop's launches and comparisons. It is lumpy (a new weight matrix costs 0.15 s to make
and hash, the cases reusing it almost nothing, and an mmvq case's comparisons take 0.025 s), so one case
ahead hid only a third of it (the per-case seconds replayed at the H100 host's phase sums: the loop
still waited 2.4 of 3.6 s); the thread goes on while the inputs made and not yet taken stay under
AHEAD_BYTES (replayed: 0.03 s of waiting). It starts before the loop's compile and makes the first
cases meanwhile.

No value changes: the same functions make them from the same case, only earlier. A reference missing
from the cache is computed by the loop, as before: its one BLAS thread is a process-wide setting, so
computing it here would change the thread count under the loop's own matrix products (an error model's
bounds). gpu/loop.py's note (references prepared on 8 threads: 66 s against 41 s) was about computing
cold references side by side; this thread computes none. STRATA_AHEAD=off makes every case's host side
in the loop (to A/B the thread on a GPU host).
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from strata_bench.cases import Case, Family
from strata_bench.checks import refcache

# The bytes of host inputs made ahead and not yet taken by the loop, at most (one case may pass it). Arrays
# shared by several cases (the families' lru_caches) count once per case, so less memory is held.
AHEAD_BYTES = 2 << 30


@dataclass
class _Now:
    """A Future-like result made when first asked for, on the asking thread (a case not made ahead)."""

    make: Callable[[], Any]
    _made: tuple | None = None

    def result(self) -> Any:
        if self._made is None:
            try:
                self._made = (self.make(), None)
            except Exception as exc:  # noqa: BLE001 - kept and raised again, as a Future's result() would
                self._made = (None, exc)
        value, exc = self._made
        if exc is not None:
            raise exc
        return value


@dataclass(frozen=True)
class HostSide:
    """A case's (host inputs, related cases) and its refcache.Lookup, each to wait for with .result()."""

    inputs: Any
    lookup: Any


@dataclass
class Ahead:
    """Makes the host side of `cases` (in loop order, families from `catalog`; built-in families only)
    ahead of the loop on one thread, while what it made and the loop has not taken holds under `budget`
    bytes of inputs; `pool` (optional, a refpool.ReferencePool) is waited for where an entry is missing.
    Without `cases` (or with `thread` False: default, STRATA_AHEAD=off) nothing is made ahead: take()
    makes each case's when asked, as it does for a case the thread passed (a second device's)."""

    cases: Iterable[Case] = ()
    catalog: Mapping[str, Family] = field(default_factory=dict)
    pool: Any = None
    thread: bool = field(default_factory=lambda: os.environ.get("STRATA_AHEAD", "on").lower() != "off")
    budget: int = AHEAD_BYTES
    # Wall seconds the thread spent per part (for `parity --profile`: beside the loop, not in its phases).
    seconds: dict[str, float] = field(default_factory=lambda: {"inputs": 0.0, "references": 0.0})

    def __post_init__(self) -> None:
        # Only a built-in family's inputs are known to be safe to make beside the loop (each draw from its
        # own seeded Generator); a user's may share state (numpy's global RandomState) with the loop.
        order = [c for c in dict.fromkeys(self.cases) if refcache._builtin(self.catalog.get(c.family))]
        self._index = {c: i for i, c in enumerate(order)}
        self._ready: dict[Case, tuple[HostSide, int]] = {}  # made, not taken: (side, its inputs' bytes)
        self._held = 0  # the bytes of _ready's inputs
        self._position = 0  # the index of the case the thread makes next
        self._finished = False  # the thread is done (or told to stop)
        self._changed = threading.Condition()
        self._worker = None
        if self.thread and len(order) > 1:
            self._worker = threading.Thread(target=self._run, args=(order,), name="strata-ahead", daemon=True)
            self._worker.start()

    def take(self, family: Family, case: Case) -> HostSide:
        """The host side of `case`: the thread's where it made it (waiting for it if it is on its way),
        else made when asked for."""
        index = self._index.get(case)
        if self._worker is not None and index is not None and self.catalog.get(case.family) is family:
            with self._changed:
                self._drop_before(index)
                self._changed.wait_for(lambda: case in self._ready or self._position > index or self._finished)
                made = self._ready.pop(case, None)
                if made is not None:
                    self._held -= made[1]
                    self._changed.notify_all()
                    return made[0]
        inputs = _Now(lambda: _inputs(family, case))
        return HostSide(inputs, _Now(lambda: self._lookup(family, case, inputs.result()[0])))

    def _drop_before(self, index: int) -> None:
        """Let go of what was made for cases before `index` and not taken: the loop goes in order, so it
        passed them (a device's fault ends its cases)."""
        for passed in [c for c in self._ready if self._index[c] < index]:
            self._held -= self._ready.pop(passed)[1]
        self._changed.notify_all()

    def _run(self, order: list[Case]) -> None:
        try:
            for index, case in enumerate(order):
                with self._changed:
                    self._changed.wait_for(lambda: self._finished or not self._ready or self._held < self.budget)
                    if self._finished:
                        return
                side = self._make(self.catalog[case.family], case)
                with self._changed:
                    self._ready[case] = (side, _nbytes(side.inputs))
                    self._held += self._ready[case][1]
                    self._position = index + 1
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._finished = True
                self._changed.notify_all()

    def _make(self, family: Family, case: Case) -> HostSide:
        """The case's host side, made now (an error is kept in it, raised where the loop asks for it)."""
        inputs = _Now(lambda: self._timed("inputs", _inputs, family, case))
        side = HostSide(inputs, _Now(lambda: self._timed("references", self._lookup, family, case,
                                                         inputs.result()[0])))
        try:
            side.lookup.result()  # makes the inputs first
        except Exception:  # noqa: BLE001 - kept in the side
            pass
        return side

    def _timed(self, part: str, make: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter()
        try:
            return make(*args)
        finally:
            self.seconds[part] += time.perf_counter() - start

    def _lookup(self, family: Family, case: Case, host: Mapping[str, Any]) -> refcache.Lookup:
        pool = self.pool
        return refcache.lookup_references(family, case, host, None if pool is None else lambda: pool.wait(case),
                                          getattr(pool, "blas", None))

    def close(self) -> None:
        """Stop the thread (a case it is making is finished first) and let go of what it made."""
        if self._worker is None:
            return
        with self._changed:
            self._finished = True
            self._changed.notify_all()
        self._worker.join()
        self._worker = None
        self._ready.clear()

    def __enter__(self) -> "Ahead":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _nbytes(inputs: Any) -> int:
    """The bytes of the arrays in a case's made inputs (0 where making them failed)."""
    try:
        host = inputs.result()[0]
    except Exception:  # noqa: BLE001 - the loop meets the error when it takes the case
        return 0
    return sum(a.nbytes for a in _arrays(host))


def _arrays(value: Any) -> Iterable[np.ndarray]:
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _arrays(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _arrays(item)


def _inputs(family: Family, case: Case) -> tuple[Mapping[str, Any], list]:
    return family.make_inputs(case), family.related_cases(case)
