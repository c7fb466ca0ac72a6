"""Seconds per parity phase: accumulated per name, printed one line each with shares."""
from __future__ import annotations

import pytest

from strata_bench.checks.phases import PHASES, PhaseTimes, maybe


def test_phases_accumulate_and_print_in_order(monkeypatch):
    clock = iter([0.0, 1.5, 2.0, 2.5, 10.0, 13.0])
    monkeypatch.setattr("strata_bench.checks.phases.time.perf_counter", lambda: next(clock))
    times = PhaseTimes()
    with times.phase("inputs"):
        pass
    with maybe(times, "inputs"):
        pass
    with maybe(None, "launches"):  # no timer: nothing kept, no clock read
        pass
    with pytest.raises(KeyError), times.phase("comparisons"):
        raise KeyError("x")  # an exception still adds its time
    assert times.seconds == {"inputs": 2.0, "references": 0.0, "launches": 0.0, "comparisons": 3.0}
    assert times.counts["inputs"] == 2
    assert times.lines(wall=6.0) == [
        "inputs           2.00 s   40.0%", "references       0.00 s    0.0%", "launches         0.00 s    0.0%",
        "comparisons      3.00 s   60.0%", "phases           5.00 s",
        "wall             6.00 s (compile, device set-up and rendering are the rest)"]
    assert tuple(times.seconds) == PHASES


def test_work_beside_the_loop_is_printed_but_not_summed():
    times = PhaseTimes()
    times.seconds["references"] = 1.0
    times.beside["references (pool)"] = 7.25
    assert times.total == 1.0
    assert times.lines()[-2:] == ["phases           1.00 s",
                                  "references (pool)     7.25 s  (beside the loop, not in the sum)"]


def test_work_before_the_loop_comes_before_the_work_beside_it():
    times = PhaseTimes()
    times.beside["references (pool)"] = 2.0
    times.before["compile"] = 8.5
    assert times.lines(wall=12.0)[-3:] == ["compile          8.50 s  (before the loop, not in the sum)",
                                           "references (pool)     2.00 s  (beside the loop, not in the sum)",
                                           "wall            12.00 s (compile, device set-up and rendering are the rest)"]
