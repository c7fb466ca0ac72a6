"""The arm contract: an arm is a label and a callable doing one run, returning a float or a `Sample`.

A run that fails in a way worth recording (nonzero exit, timeout, missing metric, a kernel that gave
wrong bits) raises `RunFailed(reason, details)`; the runner records it and goes on. Any other
exception stops the schedule (see strata_bench.ab.runner).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


class RunFailed(Exception):
    """One run failed in a way the runner records and shows (it does not stop the schedule)."""

    def __init__(self, reason: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = dict(details or {})


@dataclass(frozen=True)
class Sample:
    """A measurement with details worth keeping (exit code, output tail, wall time); a run that reads
    several metrics carries them all in `metrics` (value is the first), and its --same captures."""

    value: float
    details: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    same: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Arm:
    """One side of the comparison: a label, a callable doing one run, and what to record about it."""

    label: str  # "A" or "B"
    run: Callable[[], float | Sample]
    describe: Mapping[str, Any] = field(default_factory=dict)
