"""One arm on planted data: summary values and modified-z outliers (flagged, never dropped)."""
from __future__ import annotations

import numpy as np
import pytest

from strata_bench.stats.samples import arm_stats, modified_z, outlier_positions


def test_arm_stats_values():
    arm = arm_stats([1.0, 2.0, 3.0, 4.0])
    assert (arm.n, arm.mean, arm.median, arm.min, arm.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert arm.sd == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    assert arm.outliers == ()


def test_outlier_flagged_by_modified_z_not_dropped():
    values = [10.0, 10.1, 9.9, 10.05, 9.95, 10.02, 14.0]
    arm = arm_stats(values)
    assert arm.outliers == (6,)
    assert arm.n == 7 and arm.max == 14.0  # still counted
    # Phi^-1(3/4) * (14 - 10.02) / MAD by hand (Iglewicz and Hoaglin round Phi^-1(3/4) = 0.67449 to 0.6745)
    med = np.median(values)
    mad = np.median(np.abs(np.array(values) - med))
    assert modified_z(values)[6] == pytest.approx(0.6744897501960817 * (14.0 - med) / mad)


def test_outliers_when_mad_is_zero():
    # More than half equal: MAD is 0, the mean-absolute-deviation fallback still finds the odd one.
    assert outlier_positions([5.0] * 9 + [9.0]) == (9,)
    assert outlier_positions([5.0] * 6) == ()
