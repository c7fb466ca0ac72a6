"""One arm's values: n, mean, sd, median, extremes, and outliers by modified z-score (never dropped)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

# Iglewicz and Hoaglin's cut-off for the modified z-score.
OUTLIER_Z = 3.5


@dataclass(frozen=True)
class ArmStats:
    """One arm's measured values (warm-up and failed runs excluded)."""

    n: int
    mean: float
    sd: float
    median: float
    min: float
    max: float
    outliers: tuple[int, ...]  # positions in the values given, by modified z-score; never dropped


def arm_stats(values: Sequence[float]) -> ArmStats:
    """n, mean, sd (n-1), median, extremes and modified-z outliers of one arm."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        nan = math.nan
        return ArmStats(0, nan, nan, nan, nan, nan, ())
    sd = float(x.std(ddof=1)) if x.size > 1 else math.nan
    return ArmStats(int(x.size), float(x.mean()), sd, float(np.median(x)), float(x.min()),
                    float(x.max()), outlier_positions(x))


def modified_z(values: Sequence[float]) -> np.ndarray:
    """(x - median) / MAD scaled to a normal sd (scipy.stats.median_abs_deviation, scale="normal"),
    which is Iglewicz and Hoaglin's 0.6745 * (x - median) / MAD. With MAD = 0 (over half the values
    equal), fall back to the mean absolute deviation scaled to match (1.253314); all zeros when every
    value is equal."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return x
    dev = x - np.median(x)
    mad = float(sps.median_abs_deviation(x, scale="normal"))
    if mad > 0:
        return dev / mad
    mean_ad = float(np.mean(np.abs(dev)))
    if mean_ad > 0:
        return dev / (1.253314 * mean_ad)
    return np.zeros_like(x)


def outlier_positions(values: Sequence[float]) -> tuple[int, ...]:
    """Positions whose |modified z| exceeds OUTLIER_Z."""
    return tuple(int(i) for i in np.flatnonzero(np.abs(modified_z(values)) > OUTLIER_Z))
