"""A case's host side (its inputs, its related cases and the reference cache's lookup) made one case ahead
of the parity loop on one thread, while the loop launches and compares the case before.

A warm `parity` over the default cases spent 3.6 s of the H100 host's 12.6 s on this: numpy's random
fills making the inputs and sha256 over them finding the cached references. Both release the GIL for
large arrays (numpy's Generator fills, hashlib over 2 KiB), so on a many-core host the thread's work
hides behind the loop's launches and comparisons. No value changes: the same functions make them from
the same case, only earlier. A reference missing from the cache is computed by the loop, as before:
its one BLAS thread is a process-wide setting, so computing it here would change the thread count under
the loop's own matrix products (an error model's bounds). gpu/loop.py's note (references prepared on 8
threads: 66 s against 41 s) was about computing cold references side by side; this thread computes none.
STRATA_AHEAD=off makes every case's host side in the loop (to A/B the thread on a GPU host).
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from strata_bench.cases import Case, Family
from strata_bench.checks import refcache


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
    one case ahead on one thread; `pool` (optional, a refpool.ReferencePool) is waited for where an
    entry is missing. Without `cases` (or with `thread` False: default, STRATA_AHEAD=off) nothing is
    made ahead: take() makes each case's when asked."""

    cases: Iterable[Case] = ()
    catalog: Mapping[str, Family] = field(default_factory=dict)
    pool: Any = None
    thread: bool = field(default_factory=lambda: os.environ.get("STRATA_AHEAD", "on").lower() != "off")
    # Wall seconds the thread spent per part (for `parity --profile`: beside the loop, not in its phases).
    seconds: dict[str, float] = field(default_factory=lambda: {"inputs": 0.0, "references": 0.0})

    def __post_init__(self) -> None:
        order = list(dict.fromkeys(self.cases))
        self._next = dict(zip(order, order[1:]))
        self._made: dict[Case, HostSide] = {}
        self._executor = (cf.ThreadPoolExecutor(1, thread_name_prefix="strata-ahead")
                          if self.thread and self._next else None)

    def take(self, family: Family, case: Case) -> HostSide:
        """The host side of `case` (made ahead where it was, else made when asked for); the next case's is
        started on the thread."""
        side = self._made.pop(case, None)
        if side is None or self.catalog.get(case.family) is not family:  # made for another family: not its
            inputs = _Now(lambda: _inputs(family, case))
            side = HostSide(inputs, _Now(lambda: self._lookup(family, case, inputs.result()[0])))
        self._start(self._next.get(case))
        return side

    def _start(self, case: Case | None) -> None:
        """Start making `case`'s host side on the thread, unless it is made already or no thread is kept."""
        if self._executor is None or case is None or case in self._made:
            return
        family = self.catalog[case.family]
        # Only a built-in family's inputs are known to be safe to make beside the loop (each draw from its
        # own seeded Generator); a user's may share state (numpy's global RandomState) with the loop.
        if refcache._builtin(family):
            self._made[case] = self._submit(family, case)

    def _submit(self, family: Family, case: Case) -> HostSide:
        # Two jobs on the one thread, in order: the lookup's job finds the inputs made already.
        inputs = self._executor.submit(self._timed, "inputs", _inputs, family, case)
        return HostSide(inputs, self._executor.submit(
            lambda: self._timed("references", self._lookup, family, case, inputs.result()[0])))

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
        """Stop the thread (a case it is making is finished first; those not started are dropped)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> "Ahead":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _inputs(family: Family, case: Case) -> tuple[Mapping[str, Any], list]:
    return family.make_inputs(case), family.related_cases(case)
