"""How A/B values are judged: direction, the same band, the regression threshold, the confidence."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Criteria:
    """How values are judged; fractions, not percents (same_band=0.01 is +/-1%)."""

    higher_is_better: bool = False
    same_band: float = 0.01
    fail_on_regression: float | None = None
    confidence: float = 0.95
    seed: int = 0  # bootstrap resampling seed, so a report recomputed from records is identical
    n_resamples: int = 4000
