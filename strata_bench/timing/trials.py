"""The trials step: replay until the 95% CI of the median is within `rel_ci` of it, or the time budget is
spent, with at least `min_trials` and at most `max_trials` samples."""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:
    from strata_bench.timing.bench import TimingConfig


def median_ci(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free CI of the median from order statistics (binomial), as a (low, high) pair."""
    from scipy.stats import binom

    n = len(samples)
    x = np.sort(samples)
    if n < 6:
        return float(x[0]), float(x[-1])
    lo = int(binom.ppf((1 - confidence) / 2, n, 0.5))
    hi = int(binom.isf((1 - confidence) / 2, n, 0.5))
    return float(x[max(lo - 1, 0)]), float(x[min(hi, n - 1)])


def relative_ci(samples: list[float]) -> float:
    """Half the width of the median's 95% CI, as a fraction of the median."""
    lo, hi = median_ci(np.asarray(samples))
    return (hi - lo) / 2 / float(np.median(samples))


def run_trials(replay: Callable[[], float], launches: int, cfg: TimingConfig,
               clock: Callable[[], float] = time.perf_counter) -> tuple[list[float], float]:
    """Samples in us per call (one per `replay()`, which returns seconds for `launches` calls) and the
    final relative CI (nan when fewer than `min_trials` samples were taken)."""
    samples: list[float] = []
    deadline = clock() + cfg.budget_s
    ci_rel = math.nan
    while len(samples) < cfg.max_trials:
        samples.append(replay() / launches * 1e6)
        if len(samples) >= cfg.min_trials:
            ci_rel = relative_ci(samples)
            if ci_rel <= cfg.rel_ci or clock() > deadline:
                break
    return samples, ci_rel
