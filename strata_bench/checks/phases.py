"""Seconds spent per phase of a parity run (inputs, references, launches, comparisons), summed over the
cases, and the work before the loop (compile) and beside it (the references' pool, the cases' inputs and
lookups made ahead), so `parity --profile` shows where the time goes and the next regression is visible."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

PHASES = ("inputs", "references", "launches", "comparisons")


@dataclass
class PhaseTimes:
    """Accumulated wall seconds per phase; `phase(name)` times a block and adds it."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    # Work beside the loop (not summed into the phases: it overlaps them), e.g. 'references (pool)',
    # 'inputs (ahead)'.
    beside: dict[str, float] = field(default_factory=dict)
    # Work before the loop (not summed either), e.g. 'compile' (the references' pool runs beside it).
    before: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            self.counts[name] = self.counts.get(name, 0) + 1

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def lines(self, wall: float | None = None) -> list[str]:
        """One line per phase: seconds and share of the phases' sum (and of the wall time, if given)."""
        total = self.total or 1.0
        out = [f"{name:<12} {self.seconds[name]:8.2f} s  {100 * self.seconds[name] / total:5.1f}%"
               for name in self.seconds]
        out.append(f"{'phases':<12} {self.total:8.2f} s")
        out += [f"{name:<12} {sec:8.2f} s  (before the loop, not in the sum)" for name, sec in self.before.items()]
        out += [f"{name:<12} {sec:8.2f} s  (beside the loop, not in the sum)" for name, sec in self.beside.items()]
        if wall is not None:
            out.append(f"{'wall':<12} {wall:8.2f} s (compile, device set-up and rendering are the rest)")
        return out


@contextmanager
def maybe(times: PhaseTimes | None, name: str) -> Iterator[None]:
    """times.phase(name), or nothing when no timer is kept."""
    if times is None:
        yield
    else:
        with times.phase(name):
            yield
