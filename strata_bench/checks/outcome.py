"""Parity outcomes: each check's result, each case's result and status, and the run that collects them
(for the table, the summary and the exit code)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from strata_bench.cases import Case
from strata_bench.errors import KernelFault


class CaseStatus(str, enum.Enum):
    """A case's outcome."""

    PASS = "PASS"
    FAIL = "FAIL"
    FAULT = "FAULT"  # a kernel faulted; the CUDA context is gone


@dataclass(frozen=True)
class CheckResult:
    """One check of one variant (or, for err-equal, of all variants against one reference).

    For an f64 check, `tol` is the reference's tolerance as one number: the largest bound where each
    element has its own (so a passing check still has max_err <= tol). `bound_ratio` is the largest
    |err|/bound over the elements (above 1 fails; inf for an error where the bound is 0 or for a NaN
    output), `bound_index` that element's index in the output and `bound_at` the family's name for it.
    """

    check: str  # "written", "finite", "bitwise", "columns", "f64", "err-equal", "err-model"
    variant: str
    ok: bool
    detail: str = ""
    max_err: float | None = None
    max_ref: float | None = None
    tol: float | None = None
    nmse: float | None = None
    label: str = ""
    bound_ratio: float | None = None
    bound_index: tuple[int, ...] | None = None
    bound_at: str = ""
    baseline_ratio: float | None = None  # err-model: max|err| / the baseline's max|err| (inf where that is 0)


@dataclass(frozen=True)
class CaseResult:
    """Every check of one case on one device, and the case's status."""

    case: Case
    device: int
    status: CaseStatus
    checks: tuple[CheckResult, ...]
    seconds: float
    error: str = ""

    @property
    def worst_ratio(self) -> float | None:
        """Largest max|err|/max|ref| over the float64 checks (a scale-free accuracy figure)."""
        ratios = [c.max_err / c.max_ref for c in self.checks
                  if c.check in ("f64", "err-model") and c.max_err is not None and c.max_ref]
        return max(ratios) if ratios else None

    def to_record(self) -> dict[str, Any]:
        """The JSON record parity writes per case (results/<device>/parity-*.jsonl)."""
        c = self.case
        return {"case": c.name, "family": c.family, "format": c.fmt, "rows": c.rows, "cols": c.cols,
                "ncols": c.ncols, "data": c.data, "variants": list(c.variants), "params": dict(c.params),
                "device": self.device, "status": self.status.value, "seconds": round(self.seconds, 4),
                "error": self.error, "worst_ratio": self.worst_ratio,
                "checks": [vars(ch) for ch in self.checks]}


def fault_result(case: Case, device: int, exc: KernelFault, seconds: float) -> CaseResult:
    """The result of a case whose kernel faulted: no checks, the fault as its error."""
    return CaseResult(case, device, CaseStatus.FAULT, (), seconds, error=str(exc))


@dataclass
class ParityRun:
    """Accumulates case results in arrival order (for the table, the summary and the exit code)."""

    results: list[CaseResult] = field(default_factory=list)

    @property
    def failures(self) -> int:
        return sum(r.status is not CaseStatus.PASS for r in self.results)

    def summary(self, devices: list[int]) -> dict[str, Any]:
        """The run's summary record: case and failure counts, devices, the cases that faulted."""
        return {"cases": len(self.results), "failures": self.failures, "devices": devices,
                "faults": [r.case.name for r in self.results if r.status is CaseStatus.FAULT]}


@dataclass(frozen=True)
class DeviceCounts:
    """One device's share of a parity run."""

    device: int
    name: str
    cases: int  # cases with a result on this device
    failures: int  # FAIL and FAULT
    faults: int
    not_run: int  # selected cases left after this device's fault (its context is gone)

    def to_record(self) -> dict[str, Any]:
        return {"device": self.device, "name": self.name, "cases": self.cases, "failures": self.failures,
                "faults": self.faults, "not_run": self.not_run}

    def text(self) -> str:
        """'device 1 (NVIDIA H200): 3 cases, 1 failure (1 fault), 2 not run'."""
        line = f"device {self.device} ({self.name}): {_count(self.cases, 'case')}, {_count(self.failures, 'failure')}"
        if self.faults:
            line += f" ({_count(self.faults, 'fault')})"
        return line + (f", {self.not_run} not run" if self.not_run else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def device_counts(results: Sequence[Any], devices: Sequence[int], names: Mapping[int, str] | None = None,
                  selected: int | None = None) -> list[DeviceCounts]:
    """Counts per device, in `devices` order; `selected` (cases per device) gives the cases not run."""
    out = []
    for device in devices:
        mine = [r for r in results if r.device == device]
        failures = sum(r.status.value != "PASS" for r in mine)
        faults = sum(r.status.value == "FAULT" for r in mine)
        not_run = max(0, selected - len(mine)) if selected is not None else 0
        out.append(DeviceCounts(device, (names or {}).get(device, "?"), len(mine), failures, faults, not_run))
    return out
