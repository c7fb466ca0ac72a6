"""Statistics as text: the pull-request wording and precision."""
from __future__ import annotations

import numpy as np

from strata_bench.stats.format import format_diff, format_mean_sd, format_value
from strata_bench.stats.paired import paired_stats
from strata_bench.stats.samples import arm_stats


def test_format_diff_like_the_pull_request_text():
    a = np.array([4.9, 4.88, 4.91, 4.87, 4.9])
    b = a - np.array([0.19, 0.2, 0.195, 0.198, 0.194])
    text = format_diff(paired_stats(a, b), "s")
    assert text.startswith("-195.4 +/- ") and text.endswith(" ms (-4.0%)")
    assert format_value(0.0123, "s") == "12.3 ms"
    assert format_value(42.0, "tok/s") == "42 tok/s"
    assert format_mean_sd(arm_stats([1.0, 1.0]), "") == "1.00 +/- 0.00"
