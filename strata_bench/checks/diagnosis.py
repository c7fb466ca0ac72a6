"""The bitwise diagnosis: where two outputs differ, decoded.

A failed bitwise check reports how many elements differ, the first and the worst, both values, their
ULP distance and hex (like gguf-py's test_quants, which counts differing blocks and bits).
"""
from __future__ import annotations

import numpy as np

from strata_bench.cases import Case, Family


def as_uint(a: np.ndarray) -> np.ndarray:
    """The array's bits as unsigned integers of its item size (bytes for other sizes), for exact comparison."""
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.itemsize in (1, 2, 4, 8) else a.view(np.uint8)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place for float arrays (0 for equal bits), via the ordered-integer map."""
    if a.dtype.kind != "f":
        return np.abs(a.astype(np.int64) - b.astype(np.int64))
    bits = a.dtype.itemsize * 8
    signed = np.dtype(f"i{a.dtype.itemsize}")

    def ordered(x: np.ndarray) -> np.ndarray:
        i = x.view(signed).astype(np.int64)
        return np.where(i < 0, -(i & ((1 << (bits - 1)) - 1)), i)

    return np.abs(ordered(a) - ordered(b))


def hex_bits(x: np.generic) -> str:
    """A scalar's bits in hex, most significant byte first (2.0f -> '0x40000000')."""
    raw = np.asarray(x).tobytes()[::-1]  # little-endian bytes, most significant first
    return "0x" + raw.hex()


def diagnose(family: Family, case: Case, output: str, base: np.ndarray, other: np.ndarray,
             base_name: str, other_name: str) -> str:
    """One line: how many differ, the first and the worst, values, ULP distance and hex."""
    differ = as_uint(base) != as_uint(other)
    count = int(differ.sum())
    flat = np.flatnonzero(differ)
    first = np.unravel_index(flat[0], base.shape)
    if base.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(base.astype(np.float64) - other.astype(np.float64)).ravel()[flat]
        gap = np.where(np.isnan(gap), np.inf, gap)
    else:
        gap = np.abs(base.astype(np.int64) - other.astype(np.int64)).ravel()[flat]
    worst = np.unravel_index(flat[int(np.argmax(gap))], base.shape)

    def where(idx: tuple) -> str:
        b, o = base[idx], other[idx]
        ulp = int(ulp_distance(np.asarray([b]), np.asarray([o]))[0])
        return (f"{family.describe_index(case, output, tuple(int(i) for i in idx))}: {base_name}={b!r} "
                f"({hex_bits(b)}) {other_name}={o!r} ({hex_bits(o)}), {ulp} ulp")

    return (f"{output}: {count} of {base.size} elements differ; first at {where(first)}; "
            f"worst at {where(worst)}")
