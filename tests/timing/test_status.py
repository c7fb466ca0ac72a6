"""A bench status: one kind and its reason; the record's text as before, read back to the same status."""
from __future__ import annotations

import pytest

from strata_bench.timing.status import TIMED, BenchStatus, TimingStatus


@pytest.mark.parametrize("status, text, timed, rejected", [
    (TIMED, "timed", True, False),
    (TimingStatus(BenchStatus.PARITY_FAILED, "new differs from old in y"), "parity failed: new differs from old in y",
     False, False),
    (TimingStatus(BenchStatus.OUTPUT_DIFFERS, "lazy copy 0 of 3: y"), "timed output differs: lazy copy 0 of 3: y",
     False, True),
    (TimingStatus(BenchStatus.IMPOSSIBLE, "new at 4.060 us"), "impossible: new at 4.060 us", False, True),
    (TimingStatus(BenchStatus.KERNEL_FAULT, "cudaErrorIllegalAddress"), "kernel fault: cudaErrorIllegalAddress",
     False, False),
])
def test_text_kind_and_reading_back(status, text, timed, rejected):
    assert (str(status), status.timed, status.rejected) == (text, timed, rejected)
    assert TimingStatus.parse(text) == status


def test_a_reason_may_hold_a_colon_and_an_unknown_kind_is_refused():
    assert TimingStatus.parse("impossible: new: 3 us") == TimingStatus(BenchStatus.IMPOSSIBLE, "new: 3 us")
    with pytest.raises(ValueError, match="not a bench status: 'skipped: too big'"):
        TimingStatus.parse("skipped: too big")
