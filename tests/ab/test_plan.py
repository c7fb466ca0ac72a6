"""The A/B plan: schedules in each order, the failure budget, plan validation."""
from __future__ import annotations

import pytest

from strata_bench.ab.plan import failure_budget, make_plan, schedule
from strata_bench.errors import InputError


def _seq(slots):
    return [(s.pair, s.position, s.arm) for s in slots]


def test_abba_schedule_alternates_pairs_including_warmup():
    got = _seq(schedule("abba", 3, warmup=1))
    assert got == [(-1, 0, "B"), (-1, 1, "A"), (0, 0, "A"), (0, 1, "B"), (1, 0, "B"), (1, 1, "A"),
                   (2, 0, "A"), (2, 1, "B")]
    assert "".join(a for _, _, a in _seq(schedule("abba", 4))) == "ABBAABBA"


def test_ab_and_random_schedules():
    assert "".join(s.arm for s in schedule("ab", 3)) == "ABABAB"
    one, two = schedule("random", 30, seed=7), schedule("random", 30, seed=7)
    assert one == two
    firsts = [s.arm for s in one if s.position == 0]
    assert set(firsts) == {"A", "B"}
    assert schedule("random", 30, seed=8) != one
    for pair in range(30):  # each pair still runs each arm once
        assert sorted(s.arm for s in one if s.pair == pair) == ["A", "B"]


def test_failure_budget_and_plan_validation():
    assert failure_budget(None, 40) == 10
    assert failure_budget("10%", 44) == 4
    assert failure_budget(3, 40) == 3
    with pytest.raises(InputError, match="max-failures"):
        failure_budget("lots", 40)
    with pytest.raises(InputError, match="--order"):
        make_plan(order="abab")
    plan = make_plan(order="random", pairs=5, warmup=2)
    assert plan.max_failures == 3 and plan.total_runs == 14 and isinstance(plan.seed, int)
