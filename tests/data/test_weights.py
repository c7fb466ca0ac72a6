"""data.weights: the padded device layout."""
from __future__ import annotations

import numpy as np

from strata_bench import kit
from strata_bench.data.synthetic import synthetic_weights


def test_padded_layout_keeps_rows_and_adds_slack():
    raw = synthetic_weights("iq1_s", 3, 256, 1)  # 50-byte rows -> 64-byte stride
    flat = kit.padded("iq1_s", raw)
    assert flat.size == 3 * 64 + kit.TAIL_SLACK
    assert np.array_equal(flat[:192].reshape(3, 64)[:, :50], raw)
    assert not flat[:192].reshape(3, 64)[:, 50:].any()
    assert kit.row_stride("iq1_s", 256) == 64
