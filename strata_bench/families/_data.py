"""Small helpers the issue-4 families share: the case's data source, and launch-time settings."""
from __future__ import annotations

from dataclasses import dataclass

from strata_bench.errors import InputError

DEFAULT_SHARED_LIMIT = 48 * 1024  # bytes of shared memory a kernel may use without opting in


@dataclass(frozen=True)
class DataSource:
    """Case.data parsed: kind "seed", "edge" or "fixture", and its seed or fixture name."""

    kind: str
    seed: int = 0
    fixture: str = ""

    @property
    def edge(self) -> bool:
        return self.kind == "edge"


def parse_data(data: str) -> DataSource:
    kind, _, arg = data.partition(":")
    if kind in ("seed", "edge"):
        try:
            return DataSource(kind, seed=int(arg))
        except ValueError:
            raise InputError(f"bad case data {data!r}: expected {kind}:N with an integer N") from None
    if kind == "fixture" and arg:
        return DataSource(kind, fixture=arg)
    raise InputError(f"bad case data {data!r}: expected seed:N, edge:N or fixture:NAME")


_OPTED_IN: dict[int, int] = {}


def allow_dynamic_shared(fn, nbytes: int, static_bytes: int = 0) -> None:
    """Raise a kernel's dynamic shared memory limit when a launch needs more than the default 48 KiB.

    A driver attribute of the function, not a stream operation, so it is safe while a graph is captured.
    """
    if nbytes + static_bytes <= DEFAULT_SHARED_LIMIT or _OPTED_IN.get(fn.ptr, 0) >= nbytes:
        return
    from cupy_backends.cuda.api import driver

    driver.funcSetAttribute(fn.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
    _OPTED_IN[fn.ptr] = nbytes
