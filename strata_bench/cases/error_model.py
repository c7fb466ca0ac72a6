"""The error-model protocol: how a variant's float64 error is judged where its arithmetic is not the
family's, so it is not held bitwise to its baseline (a TOML variant's declared bound, llama.cpp's kernels'
arithmetic). One protocol for all of them: a bound for every output element, given the case, its host
inputs, the reference and the baseline's max|err| against that reference; parity then checks each element
against its own bound (checks/parity.py), exactly as it checks the family's.
"""
from __future__ import annotations

from typing import Any, Mapping, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class ErrorModel(Protocol):
    # Whether the model may judge its variant where that variant is the case's baseline (the first variant,
    # whose error the others' are set against): a model relative to the baseline's error cannot.
    judges_baseline: bool

    def applies(self, fmt: str) -> bool:
        """True where the model judges this format (else the family's own bound does)."""

    def bounds(self, case: Any, host: Mapping[str, Any], exp: Any, baseline_err: float | None) -> float | np.ndarray:
        """The bound on |err| of every element of `exp.ref` (a float for all, or an array of its shape);
        `baseline_err` is the baseline's max|err| against `exp` (None where the variant is the baseline)."""

    def describe(self) -> str:
        """Why: the model's rule, for a failure's message."""


def max_abs_finite(ref: Any) -> float:
    """max |ref| over its finite elements (0 for none): what a bound relative to the reference scales by."""
    values = np.asarray(ref, dtype=np.float64)
    finite = values[np.isfinite(values)]
    return float(np.max(np.abs(finite))) if finite.size else 0.0
