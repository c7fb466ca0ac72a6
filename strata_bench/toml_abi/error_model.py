"""A variant's own error model: how its float64 error is judged when it is not bitwise equal to its
baseline (a foreign kernel with its own arithmetic: ggml's iq2_xxs dot truncates an integer division,
its iq1_s uses the raw activation sum), declared in TOML:

    [variant.error]
    per_format = { iq2_xxs = 3e-4, iq1_s = 2e-2 }   # max|err| <= value x max|ref|, for those formats
    baseline_factor = 4.0                           # max|err| <= 4 x the baseline's max|err|, same case and
                                                    # reference
Both may be given (both must hold); a format `per_format` does not list keeps the family's own bound
unless `baseline_factor` is given. Such a variant is not required to be bitwise equal to the baseline (nor
its columns to the 1-column call); parity shows its max|err| and its ratio to the baseline's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from strata_bench.cases.error_model import max_abs_finite
from strata_bench.errors import InputError


@dataclass(frozen=True)
class TomlErrorModel:
    """cases/error_model.ErrorModel from a TOML [variant.error] table: one bound for every element."""

    per_format: tuple[tuple[str, float], ...] = ()
    baseline_factor: float | None = None
    judges_baseline: ClassVar[bool] = False  # declared against the baseline: it never judges the baseline

    def bounds(self, case: Any, host: Any, exp: Any, baseline_err: float | None) -> float:
        return self.bound(case.fmt, max_abs_finite(exp.ref), baseline_err)[0]

    def applies(self, fmt: str) -> bool:
        """True where the model judges this format (else the family's own bound does)."""
        return self.baseline_factor is not None or fmt in dict(self.per_format)

    def bound(self, fmt: str, max_ref: float, baseline_err: float | None) -> tuple[float, str]:
        """(the bound on max|err|, why) for a case of format `fmt` whose reference has max|ref| `max_ref`
        and whose baseline's max|err| against it is `baseline_err`."""
        bounds = []
        rel = dict(self.per_format).get(fmt)
        if rel is not None:
            bounds.append((rel * max_ref, f"{rel:g} x max|ref| for {fmt}"))
        if self.baseline_factor is not None:
            base = math.inf if baseline_err is None else baseline_err
            bounds.append((self.baseline_factor * base, f"{self.baseline_factor:g} x the baseline's max|err| "
                                                        f"{base:.3e}"))
        return min(bounds)

    def describe(self) -> str:
        parts = [f"{v:g} x max|ref| for {f}" for f, v in self.per_format]
        if self.baseline_factor is not None:
            parts.append(f"{self.baseline_factor:g} x the baseline's max|err|")
        return "; ".join(parts)


def parse_error_model(value: Any, formats: tuple[str, ...], where: str) -> TomlErrorModel:
    if not isinstance(value, dict) or not value or set(value) - {"per_format", "baseline_factor"}:
        raise InputError(f"{where}: expected a table with per_format = {{ FORMAT = bound, ... }} and/or "
                         f"baseline_factor = k, got {value!r}")
    per_format = value.get("per_format", {})
    if not isinstance(per_format, dict):
        raise InputError(f"{where}.per_format: expected a table of FORMAT = bound, got {per_format!r}")
    pairs = []
    for fmt, bound in per_format.items():
        if formats and fmt not in formats:
            raise InputError(f"{where}.per_format.{fmt}: not a format of the family ({', '.join(formats)})")
        if isinstance(bound, bool) or not isinstance(bound, (int, float)) or not 0 <= bound < math.inf:
            raise InputError(f"{where}.per_format.{fmt}: expected a bound >= 0 (relative to max|ref|), got {bound!r}")
        pairs.append((fmt, float(bound)))
    factor = value.get("baseline_factor")
    if factor is not None and (isinstance(factor, bool) or not isinstance(factor, (int, float))
                               or not 0 < factor < math.inf):
        raise InputError(f"{where}.baseline_factor: expected a number > 0, got {factor!r}")
    return TomlErrorModel(tuple(pairs), None if factor is None else float(factor))
