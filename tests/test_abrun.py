"""The A/B runner: schedule, records, failures, interruption, and command arms (small real processes)."""
from __future__ import annotations

import json
import os
import sys
import time

import pytest

from strata_bench.ab import runner as R
from strata_bench.errors import CheckFailed, InputError
from strata_bench.results.store import ResultsWriter, read_records
from strata_bench.stats.core import Verdict

PY = sys.executable


def _seq(slots):
    return [(s.pair, s.position, s.arm) for s in slots]


def test_abba_schedule_alternates_pairs_including_warmup():
    got = _seq(R.schedule("abba", 3, warmup=1))
    assert got == [(-1, 0, "B"), (-1, 1, "A"), (0, 0, "A"), (0, 1, "B"), (1, 0, "B"), (1, 1, "A"),
                   (2, 0, "A"), (2, 1, "B")]
    assert "".join(a for _, _, a in _seq(R.schedule("abba", 4))) == "ABBAABBA"


def test_ab_and_random_schedules():
    assert "".join(s.arm for s in R.schedule("ab", 3)) == "ABABAB"
    one, two = R.schedule("random", 30, seed=7), R.schedule("random", 30, seed=7)
    assert one == two
    firsts = [s.arm for s in one if s.position == 0]
    assert set(firsts) == {"A", "B"}
    assert R.schedule("random", 30, seed=8) != one
    for pair in range(30):  # each pair still runs each arm once
        assert sorted(s.arm for s in one if s.pair == pair) == ["A", "B"]


def test_failure_budget_and_plan_validation():
    assert R.failure_budget(None, 40) == 10
    assert R.failure_budget("10%", 44) == 4
    assert R.failure_budget(3, 40) == 3
    with pytest.raises(InputError, match="max-failures"):
        R.failure_budget("lots", 40)
    with pytest.raises(InputError, match="--order"):
        R.make_plan(order="abab")
    plan = R.make_plan(order="random", pairs=5, warmup=2)
    assert plan.max_failures == 3 and plan.total_runs == 14 and isinstance(plan.seed, int)


def _arm(label, values):
    """A fake arm returning the next planted value; a string raises RunFailed with it as reason."""
    it = iter(values)

    def run():
        value = next(it)
        if isinstance(value, str):
            raise R.RunFailed(value, {"exit_code": 9})
        if isinstance(value, BaseException):
            raise value
        return value

    return R.Arm(label, run, {"variant": label.lower()})


def test_records_follow_abba_order_and_are_appended(tmp_path):
    plan = R.make_plan("abba", pairs=4, warmup=1, seed=1)
    writer = ResultsWriter(tmp_path, "ab", {"test": True})
    outcome = R.run_ab(_arm("A", [1.0, 1.0, 1.1, 0.9, 1.0]), _arm("B", [2.0, 2.0, 2.1, 1.9, 2.0]), plan, writer)
    R.finish(writer, [outcome])
    records = read_records(writer.records_path)
    assert records[0]["record"] == "plan" and records[0]["arms"]["B"] == {"variant": "b"}
    runs = [r for r in records if r["record"] == "run"]
    assert [(r["pair"], r["position"], r["arm"]) for r in runs] == _seq(R.schedule("abba", 4, 1))
    assert [r["run_index"] for r in runs] == list(range(10))
    assert [r["warmup"] for r in runs] == [True, True] + [False] * 8
    assert outcome.comparison.paired.n == 4 and outcome.comparison.paired.mean_diff == pytest.approx(1.0)
    assert outcome.comparison.verdict is Verdict.SLOWER
    assert "2 warm-up runs discarded" in outcome.notes()[0]


def test_failed_run_is_recorded_shown_and_its_pair_excluded(tmp_path):
    plan = R.make_plan("ab", pairs=4, warmup=0, seed=1)
    writer = ResultsWriter(tmp_path, "ab", {})
    outcome = R.run_ab(_arm("A", [1.0, 1.0, 1.0, 1.0]), _arm("B", [2.0, "exit code 9", 2.0, 2.0]), plan, writer)
    failed = [r for r in read_records(writer.records_path) if r.get("failure")]
    assert len(failed) == 1 and failed[0]["failure"] == "exit code 9" and failed[0]["exit_code"] == 9
    assert outcome.excluded_pairs == (1,)
    assert outcome.comparison.paired.n == 3
    assert outcome.comparison.a.n == 4 and outcome.comparison.b.n == 3  # arm stats keep A's run of pair 1
    assert any("pairs excluded" in n and ": 1" in n for n in outcome.notes())
    assert not outcome.stopped


def test_too_many_failures_stop_with_check_failed(tmp_path):
    plan = R.make_plan("abba", pairs=10, warmup=0, max_failures="2")
    writer = ResultsWriter(tmp_path, "ab", {})
    outcome = R.run_ab(_arm("A", [1.0] * 10), _arm("B", ["boom"] * 10), plan, writer)
    assert "3 of" in outcome.stopped and len(outcome.runs) < 20
    assert read_records(writer.records_path)[-1]["record"] == "stopped"
    with pytest.raises(CheckFailed, match="too many failed runs"):
        R.AbReport((outcome,), None, None).raise_for_status()


def test_interrupt_keeps_every_finished_record(tmp_path):
    plan = R.make_plan("abba", pairs=5, warmup=0)
    writer = ResultsWriter(tmp_path, "ab", {})
    with pytest.raises(KeyboardInterrupt):
        R.run_ab(_arm("A", [1.0, 1.0, KeyboardInterrupt()]), _arm("B", [2.0, 2.0, 2.0]), plan, writer)
    writer.close()
    records = read_records(writer.records_path)
    assert [r["record"] for r in records] == ["plan", "run", "run", "run", "run", "interrupted"]
    assert "KeyboardInterrupt" in records[-1]["error"]
    rebuilt = R.outcomes_from_records(records)[0]
    assert rebuilt.interrupted and rebuilt.comparison.paired.n == 2


def test_outcome_rebuilt_from_records_matches_live(tmp_path):
    plan = R.make_plan("abba", pairs=6, warmup=1, seed=3)
    writer = ResultsWriter(tmp_path, "ab", {})
    a = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 1.00]
    b = [1.05, 1.06, 1.04, 1.07, 1.05, 1.08, 1.06]
    live = R.run_ab(_arm("A", a), _arm("B", b), plan, writer, case="k1")
    writer.close()
    rebuilt = R.outcomes_from_records(read_records(writer.records_path))
    assert len(rebuilt) == 1 and rebuilt[0].case == "k1"
    assert rebuilt[0].comparison == live.comparison
    assert rebuilt[0].plan == live.plan


def test_regression_check_raises():
    from strata_bench.stats.core import Criteria

    plan = R.make_plan("abba", pairs=6, warmup=0, criteria=Criteria(fail_on_regression=0.02))
    outcome = R.run_ab(_arm("A", [1.0, 1.01, 0.99, 1.0, 1.0, 1.01]), _arm("B", [1.1, 1.11, 1.09, 1.1, 1.1, 1.11]), plan)
    assert outcome.regression
    with pytest.raises(CheckFailed, match="regression"):
        R.AbReport((outcome,), None, None).raise_for_status()


# ---------------------------------------------------------------- command arms (real processes)

def _spec(code, **kw):
    return R.CommandSpec((PY, "-c", code), **kw)


def test_wall_time_of_a_sleep():
    sample = R.run_command(_spec("import time; time.sleep(0.05)"))
    assert 0.05 <= sample.value < 2.0
    assert sample.details["exit_code"] == 0 and sample.details["wall_s"] == pytest.approx(sample.value, abs=1e-5)


def test_metric_read_from_stdout_and_stderr_last_match():
    regex = R.compile_metric(r"tok/s: (?P<value>[0-9.]+)")
    code = "import sys; print('tok/s: 1.5'); print('tok/s: 42.25', file=sys.stderr)"
    assert R.run_command(_spec(code, metric=regex)).value == 42.25


def test_missing_metric_and_bad_number_fail():
    with pytest.raises(R.RunFailed, match="metric not found"):
        R.run_command(_spec("print('nothing')", metric=R.compile_metric(r"v=(?P<value>\d+)")))
    with pytest.raises(R.RunFailed, match="not a number"):
        R.run_command(_spec("print('v=1.2.3')", metric=R.compile_metric(r"v=(?P<value>[\d.]+)")))
    with pytest.raises(InputError, match=r"\(\?P<value>"):
        R.compile_metric(r"v=(\d+)")
    with pytest.raises(InputError, match="valid regex"):
        R.compile_metric(r"v=(?P<value>")


def test_failing_command_keeps_exit_code_and_output():
    with pytest.raises(R.RunFailed) as info:
        R.run_command(_spec("import sys; print('bad input'); sys.exit(3)"))
    assert info.value.reason == "exit code 3"
    assert info.value.details["exit_code"] == 3 and "bad input" in info.value.details["output_tail"]


def test_timeout_kills_the_whole_process_group():
    # The child starts a grandchild holding the output pipe: only a group kill returns quickly.
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
            "print('started', flush=True); time.sleep(30)")
    started = time.perf_counter()
    with pytest.raises(R.RunFailed, match="timed out after 0.5 s") as info:
        R.run_command(_spec(code, timeout=0.5))
    assert time.perf_counter() - started < R.KILL_GRACE_S
    assert "started" in info.value.details["output_tail"]


def test_env_switch_changes_only_the_named_variables(monkeypatch):
    monkeypatch.setenv("STRATA_TEST_DROP", "x")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    spec = _spec(code, env={"STRATA_TEST_SWITCH": "1", "STRATA_TEST_DROP": None})
    child = json.loads(R.run_command(spec).details["output_tail"])
    expected = dict(os.environ)
    expected.pop("STRATA_TEST_DROP")
    expected["STRATA_TEST_SWITCH"] = "1"
    assert child == expected


def test_parse_env_and_argv():
    assert R.parse_env(["A=1", "B=", "C"]) == {"A": "1", "B": "", "C": None}
    with pytest.raises(InputError, match="NAME=VALUE"):
        R.parse_env(["1X=2"])
    assert R.command_argv("prog --name 'two words'", shell=False) == ("prog", "--name", "two words")
    assert R.command_argv("a | b", shell=True) == "a | b"
    with pytest.raises(InputError, match="cannot split"):
        R.command_argv("prog 'open", shell=False)
    with pytest.raises(InputError, match="command not found"):
        R.command_arm("A", R.CommandSpec(("strata-no-such-program-xyz",)))


def test_shell_mode_runs_through_sh():
    regex = R.compile_metric(r"v=(?P<value>\d+)")
    spec = R.CommandSpec("echo v=$((6 * 7))", shell=True, metric=regex)
    assert R.run_command(spec).value == 42


def test_command_ab_end_to_end(tmp_path):
    regex = R.compile_metric(r"v=(?P<value>\d+)")
    code = "import os; print('v=' + os.environ.get('STRATA_TEST_V', '10'))"
    spec_a = _spec(code, env={"STRATA_TEST_V": "10"}, metric=regex)
    spec_b = _spec(code, env={"STRATA_TEST_V": "11"}, metric=regex)
    plan = R.make_plan("abba", pairs=3, warmup=0, unit="")
    report = R.run_command_ab(spec_a, spec_b, plan, tmp_path, {"devices": []}, quiet=True)
    outcome = report.outcomes[0]
    assert outcome.comparison.paired.mean_diff == 1.0
    assert report.summary_path.parent == tmp_path / "cpu"
    summary = json.loads(report.summary_path.read_text())
    assert summary["kind"] == "ab" and summary["provenance"]["ab"]["B"]["env"] == {"STRATA_TEST_V": "11"}
    assert summary["summary"]["cases"][0]["verdict"] == "SLOWER"
