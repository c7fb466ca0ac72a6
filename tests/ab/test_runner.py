"""The A/B runner: records in schedule order, failures, the failure budget, interruption, regression."""
from __future__ import annotations

import pytest

from strata_bench.ab.plan import make_plan, schedule
from strata_bench.ab.records import AbReport
from strata_bench.ab.runner import run_ab
from strata_bench.ab.store import finish, outcomes_from_records
from strata_bench.errors import CheckFailed
from strata_bench.results.store import ResultsWriter, read_records
from strata_bench.stats.verdict import Verdict


def _seq(slots):
    return [(s.pair, s.position, s.arm) for s in slots]



def test_records_follow_abba_order_and_are_appended(tmp_path, planted_arm):
    plan = make_plan("abba", pairs=4, warmup=1, seed=1)
    writer = ResultsWriter(tmp_path, "ab", {"test": True})
    outcome = run_ab(planted_arm("A", [1.0, 1.0, 1.1, 0.9, 1.0]), planted_arm("B", [2.0, 2.0, 2.1, 1.9, 2.0]), plan, writer)
    finish(writer, [outcome])
    records = read_records(writer.records_path)
    assert records[0]["record"] == "plan" and records[0]["arms"]["B"] == {"variant": "b"}
    runs = [r for r in records if r["record"] == "run"]
    assert [(r["pair"], r["position"], r["arm"]) for r in runs] == _seq(schedule("abba", 4, 1))
    assert [r["run_index"] for r in runs] == list(range(10))
    assert [r["warmup"] for r in runs] == [True, True] + [False] * 8
    assert outcome.comparison.paired.n == 4 and outcome.comparison.paired.mean_diff == pytest.approx(1.0)
    assert outcome.comparison.verdict is Verdict.SLOWER
    assert "2 warm-up runs discarded" in outcome.notes()[0]


def test_failed_run_is_recorded_shown_and_its_pair_excluded(tmp_path, planted_arm):
    plan = make_plan("ab", pairs=4, warmup=0, seed=1)
    writer = ResultsWriter(tmp_path, "ab", {})
    outcome = run_ab(planted_arm("A", [1.0, 1.0, 1.0, 1.0]), planted_arm("B", [2.0, "exit code 9", 2.0, 2.0]), plan, writer)
    failed = [r for r in read_records(writer.records_path) if r.get("failure")]
    assert len(failed) == 1 and failed[0]["failure"] == "exit code 9" and failed[0]["exit_code"] == 9
    assert outcome.excluded_pairs == (1,)
    assert outcome.comparison.paired.n == 3
    assert outcome.comparison.a.n == 4 and outcome.comparison.b.n == 3  # arm stats keep A's run of pair 1
    assert any("pairs excluded" in n and ": 1" in n for n in outcome.notes())
    assert not outcome.stopped


def test_too_many_failures_stop_with_check_failed(tmp_path, planted_arm):
    plan = make_plan("abba", pairs=10, warmup=0, max_failures="2")
    writer = ResultsWriter(tmp_path, "ab", {})
    outcome = run_ab(planted_arm("A", [1.0] * 10), planted_arm("B", ["boom"] * 10), plan, writer)
    assert "3 of" in outcome.stopped and len(outcome.runs) < 20
    assert read_records(writer.records_path)[-1]["record"] == "stopped"
    with pytest.raises(CheckFailed, match="too many failed runs"):
        AbReport((outcome,), None, None).raise_for_status()


def test_interrupt_keeps_every_finished_record(tmp_path, planted_arm):
    plan = make_plan("abba", pairs=5, warmup=0)
    writer = ResultsWriter(tmp_path, "ab", {})
    with pytest.raises(KeyboardInterrupt):
        run_ab(planted_arm("A", [1.0, 1.0, KeyboardInterrupt()]), planted_arm("B", [2.0, 2.0, 2.0]), plan, writer)
    writer.close()
    records = read_records(writer.records_path)
    assert [r["record"] for r in records] == ["plan", "run", "run", "run", "run", "interrupted"]
    assert "KeyboardInterrupt" in records[-1]["error"]
    rebuilt = outcomes_from_records(records)[0]
    assert rebuilt.interrupted and rebuilt.comparison.paired.n == 2


def test_regression_check_raises(planted_arm):
    from strata_bench.stats.criteria import Criteria

    plan = make_plan("abba", pairs=6, warmup=0, criteria=Criteria(fail_on_regression=0.02))
    outcome = run_ab(planted_arm("A", [1.0, 1.01, 0.99, 1.0, 1.0, 1.01]), planted_arm("B", [1.1, 1.11, 1.09, 1.1, 1.1, 1.11]), plan)
    assert outcome.regression
    with pytest.raises(CheckFailed, match="regression"):
        AbReport((outcome,), None, None).raise_for_status()


@pytest.mark.slow  # about 15 s on 2 cores: the paired statistics again after every added pair
def test_until_decided_adds_pairs_until_a_verdict(tmp_path, planted_arm):
    """Noisy at first, then steady: the first 6 pairs are UNDECIDED, more pairs decide SLOWER."""
    plan = make_plan("abba", pairs=6, warmup=0, seed=1, until_decided=30)
    wobble = [1.0, 1.2, 0.9, 1.15, 0.85, 1.1]
    a = planted_arm("A", wobble + [1.0] * 30)
    b = planted_arm("B", wobble[::-1] + [1.05] * 30)
    writer = ResultsWriter(tmp_path, "ab", {})
    outcome = run_ab(a, b, plan, writer)
    assert outcome.comparison.verdict is Verdict.SLOWER
    assert 6 < outcome.plan.pairs < 30 and outcome.plan.pairs % 2 == 0
    extended = [r for r in read_records(writer.records_path) if r["record"] == "extended"]
    assert extended[0] == {"record": "extended", "case": "command", "pairs": 8, "reason": "UNDECIDED: wall time"}
    assert outcomes_from_records(read_records(writer.records_path))[0].plan.pairs == outcome.plan.pairs


def test_until_decided_stops_at_the_cap(planted_arm):
    plan = make_plan("abba", pairs=4, warmup=0, seed=1, until_decided=8)
    import random

    rng = random.Random(0)
    outcome = run_ab(planted_arm("A", [rng.uniform(0.5, 1.5) for _ in range(8)]),
                     planted_arm("B", [rng.uniform(0.5, 1.5) for _ in range(8)]), plan)
    assert outcome.plan.pairs == 8 and outcome.comparison.verdict is Verdict.UNDECIDED
    assert "pairs would decide" in outcome.comparison.reason
