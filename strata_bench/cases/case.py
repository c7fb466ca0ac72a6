"""The records a family's cases are made of: Case (its fields are its name), Expected (a float64
reference with its tolerance), Output, and CaseFilter (what --family/--format/-k select)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One family x format x shape x columns x data source x variants."""

    family: str
    fmt: str
    rows: int  # output rows (weight rows)
    cols: int  # inputs per row (k)
    ncols: int = 1  # activation columns, entries or tokens, as the family defines
    data: str = "seed:1"  # "seed:N", "edge:N" or "fixture:NAME"
    variants: tuple[str, ...] = ("old", "new")  # the first is the baseline
    params: tuple[tuple[str, Any], ...] = ()  # family-specific knobs, kept hashable

    @property
    def name(self) -> str:
        extra = "".join(f"/{k}={v}" for k, v in self.params)
        return f"{self.family}/{self.fmt}/{self.rows}x{self.cols}/n{self.ncols}/{self.data}{extra}"

    def param(self, key: str, default: Any = None) -> Any:
        """A family-specific knob of the case (`params`), or `default` where the case does not set it."""
        return dict(self.params).get(key, default)

    @property
    def baseline(self) -> str:
        """The variant every other one is compared with: the first listed."""
        return self.variants[0]


@dataclass(frozen=True)
class Expected:
    """A float64 reference for one output, with the tolerance the arithmetic contract allows.

    `tol` bounds |out - ref| element by element (absolute): one float for every element, or an array
    broadcastable to the output's shape giving each element its own bound (a bound derived per output
    element is passed whole: its maximum would let an element with a small bound exceed it unseen).
    `why` names the derivation.
    """

    output: str
    ref: Any  # np.ndarray float64, same shape as the output
    tol: Any  # float, or np.ndarray broadcastable to ref's shape
    why: str
    label: str = "ref"  # which reference: "f64", "f64(q8_1 acts)", ...


@dataclass(frozen=True)
class Output:
    """A device output a variant writes, with how its bytes are compared."""

    name: str
    array: Any  # cupy.ndarray


@dataclass(frozen=True)
class CaseFilter:
    """Which cases a command runs: families, formats (empty: all) and a regular expression on the name."""

    families: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    pattern: str | None = None

    def matches(self, case: Case) -> bool:
        """True when the case passes every filter that is set."""
        if self.families and case.family not in self.families:
            return False
        if self.formats and case.fmt not in self.formats:
            return False
        return self.pattern is None or re.search(self.pattern, case.name) is not None
