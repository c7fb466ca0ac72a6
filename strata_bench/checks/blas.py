"""The BLAS thread count of this process, set at run time: the float64 references are computed with one
BLAS thread wherever that can be set, so the loop and refpool's workers (whose environment says one
thread before their numpy loads) compute the same bits. A float64 product's sum order, and so the last
bits of some references, depend on the thread count (27 of the default matrix's 905 references differ
between 1 and 2 OpenBLAS threads; 2 and 16 agree).

Only OpenBLAS (numpy's wheels ship it as scipy-openblas) is known here: it is found among the libraries
this process has loaded and driven through its openblas_set_num_threads. Where it is not found, nothing
is set and `can_set()` says so (the references are then computed, and keyed, under the process's own
settings). threadpoolctl does this for every BLAS, but the GPU hosts this runs on do not have it
installed; numpy's own OpenBLAS is the one these references use.
"""
from __future__ import annotations

import ctypes
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterator

_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("64_", "")


@lru_cache(maxsize=1)
def _openblas() -> tuple[Any, Any] | None:
    """(set_num_threads, get_num_threads) of the loaded OpenBLAS, or None."""
    import numpy  # noqa: F401  (loads the BLAS)

    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1].lower()})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            for suffix in _SUFFIXES:
                setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                if setter is not None and getter is not None:
                    setter.argtypes, setter.restype, getter.restype = [ctypes.c_int], None, ctypes.c_int
                    return setter, getter
    return None


def can_set() -> bool:
    return _openblas() is not None


def threads() -> int | None:
    """The BLAS's thread count now (None: unknown)."""
    found = _openblas()
    return None if found is None else int(found[1]())


@contextmanager
def one_thread() -> Iterator[bool]:
    """Run the block with one BLAS thread (True), restoring the count after; False where it cannot be set."""
    found = _openblas()
    if found is None:
        yield False
        return
    setter, getter = found
    before = int(getter())
    setter(1)
    try:
        yield True
    finally:
        setter(before)
