"""What parity's comparisons reuse instead of making again: work arrays from check to check, and the
checks of a variant whose outputs are an earlier variant's, bit for bit."""
from __future__ import annotations

import math
import threading
from typing import Mapping

import numpy as np

from strata_bench.checks.diagnosis import as_uint
from strata_bench.gpu.launch import VariantRun


class Scratch(threading.local):
    """Work arrays reused from check to check (per thread), at most one per slot as large as the largest
    output seen: a fresh array of tens of MB costs its page faults on every check (a 20 MB |got - ref| took
    5.1 ms freshly allocated, 1.7 ms in a reused buffer). A view is C-ordered, as a fresh array would be."""

    def __init__(self) -> None:
        self.slots: dict[str, np.ndarray] = {}

    def array(self, slot: str, shape: tuple[int, ...]) -> np.ndarray:
        """An uninitialised float64 array of `shape`, which the slot's next request overwrites."""
        size = math.prod(shape)
        buf = self.slots.get(slot)
        if buf is None or buf.size < size:
            buf = self.slots[slot] = np.empty(size)
        return buf[:size].reshape(shape)


SCRATCH = Scratch()  # the comparisons' work arrays


def twins_of(runs: Mapping[str, VariantRun]) -> dict[str, str]:
    """variant -> the first earlier variant whose outputs have the same names, shapes, dtypes and bits.
    Its values against any reference, and whether they are finite, are then the same (output_values is a
    function of the outputs), so its checks are copied; comparing the outputs costs less than the float64
    copy of them that the value comparison needs."""
    twins: dict[str, str] = {}
    firsts: list[str] = []
    for variant, run in runs.items():
        twin = next((f for f in firsts if same_outputs(runs[f].outputs, run.outputs)), None)
        if twin is None:
            firsts.append(variant)
        else:
            twins[variant] = twin
    return twins


def same_outputs(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> bool:
    """The same output names, each with the same shape, dtype, strides and bits."""
    return list(a) == list(b) and all(
        a[n].shape == b[n].shape and a[n].dtype == b[n].dtype and a[n].strides == b[n].strides
        and np.array_equal(as_uint(a[n]), as_uint(b[n])) for n in a)
