"""Where a case's data comes from: Case.data ("seed:N", "edge:N" or "fixture:NAME") parsed."""
from __future__ import annotations

from dataclasses import dataclass

from strata_bench.errors import InputError


@dataclass(frozen=True)
class DataSource:
    """Case.data parsed: kind "seed", "edge" or "fixture", and its seed or fixture name."""

    kind: str
    seed: int = 0
    fixture: str = ""

    @property
    def edge(self) -> bool:
        """True for edge data (the format's edge-case blocks first, then seeded ones)."""
        return self.kind == "edge"


def parse_data(data: str) -> DataSource:
    """Parse a case's data string; an InputError names the three accepted forms."""
    kind, _, arg = data.partition(":")
    if kind in ("seed", "edge"):
        try:
            return DataSource(kind, seed=int(arg))
        except ValueError:
            raise InputError(f"bad case data {data!r}: expected {kind}:N with an integer N") from None
    if kind == "fixture" and arg:
        return DataSource(kind, fixture=arg)
    raise InputError(f"bad case data {data!r}: expected seed:N, edge:N or fixture:NAME")
