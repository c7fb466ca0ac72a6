"""The fixture record: raw quantized blocks of one format, their shape, and where they came from.

A fixture's name is also its file name (`<name>.npz`), so names are limited to a safe alphabet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from strata_bench.errors import InputError
from strata_bench.formats import QuantFormat, get_format

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True, eq=False)
class Fixture:
    """Raw blocks (rows, bytes_per_row) uint8 of one format, with where they came from."""

    name: str
    fmt: str
    rows: int
    cols: int
    raw: np.ndarray
    provenance: dict[str, Any] = field(default_factory=dict)
    activations: np.ndarray | None = None  # float32 (n, cols), seeded, where a case needs them

    def __post_init__(self) -> None:
        check_name(self.name)
        expected = (self.rows, self.format.bytes_per_row(self.cols))
        if self.raw.dtype != np.uint8 or self.raw.shape != expected:
            raise InputError(f"fixture {self.name}: raw blocks are {self.raw.dtype}{self.raw.shape}, "
                             f"expected uint8{expected} for {self.fmt} {self.rows}x{self.cols}")
        if self.activations is not None and self.activations.dtype != np.float32:
            raise InputError(f"fixture {self.name}: activations are {self.activations.dtype}, not float32")

    @property
    def format(self) -> QuantFormat:
        """The registered block format named by `fmt`."""
        return get_format(self.fmt)

    def values(self) -> np.ndarray:
        """float32 (rows, cols): the oracle's dequantization."""
        return self.format.dequantize(self.raw)

    def values_f64(self) -> np.ndarray:
        """float64 (rows, cols): the exact dequantization."""
        return self.format.dequantize_f64(self.raw)


def check_name(name: str) -> str:
    """`name` unchanged when it is a valid fixture (and file) name, else InputError."""
    if not _NAME_RE.match(name or ""):
        raise InputError(f"bad fixture name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


@dataclass(frozen=True)
class FixtureRef:
    """A fixture as a family sees it when making cases: its name, format and shape (and, for reports,
    where its rows came from). The blocks themselves are loaded when a case runs."""

    name: str
    fmt: str
    rows: int
    cols: int
    provenance: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def data(self) -> str:
        """The Case.data string of a case over this fixture."""
        return f"fixture:{self.name}"


def ref_from_entry(name: str, entry: Mapping[str, Any]) -> FixtureRef:
    """A FixtureRef from a manifest entry."""
    return FixtureRef(name, str(entry["fmt"]), int(entry["rows"]), int(entry["cols"]),
                      dict(entry.get("provenance") or {}))
