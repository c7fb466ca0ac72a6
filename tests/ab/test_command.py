"""Command arms (small real processes): wall time, metric, failures, timeouts, env switches, end to end."""
from __future__ import annotations

import json
import os
import sys
import time

import pytest

from strata_bench.ab.arms import RunFailed
from strata_bench.ab.command import (
    KILL_GRACE_S,
    CommandSpec,
    command_argv,
    command_arm,
    compile_metric,
    parse_env,
    run_command,
)
from strata_bench.ab.matrix import Combination, run_matrix
from strata_bench.ab.plan import make_plan
from strata_bench.errors import InputError

PY = sys.executable


def _spec(code, **kw):
    return CommandSpec((PY, "-c", code), **kw)


def test_wall_time_of_a_sleep():
    sample = run_command(_spec("import time; time.sleep(0.05)"))
    assert 0.05 <= sample.value < 2.0
    assert sample.details["exit_code"] == 0 and sample.details["wall_s"] == pytest.approx(sample.value, abs=1e-5)


def test_metric_read_from_stdout_and_stderr_last_match():
    regex = compile_metric(r"tok/s: (?P<value>[0-9.]+)")
    code = "import sys; print('tok/s: 1.5'); print('tok/s: 42.25', file=sys.stderr)"
    assert run_command(_spec(code, metric=regex)).value == 42.25


def test_missing_metric_and_bad_number_fail():
    with pytest.raises(RunFailed, match="metric not found"):
        run_command(_spec("print('nothing')", metric=compile_metric(r"v=(?P<value>\d+)")))
    with pytest.raises(RunFailed, match="not a number"):
        run_command(_spec("print('v=1.2.3')", metric=compile_metric(r"v=(?P<value>[\d.]+)")))
    with pytest.raises(InputError, match=r"\(\?P<value>"):
        compile_metric(r"v=(\d+)")
    with pytest.raises(InputError, match="valid regex"):
        compile_metric(r"v=(?P<value>")


def test_failing_command_keeps_exit_code_and_output():
    with pytest.raises(RunFailed) as info:
        run_command(_spec("import sys; print('bad input'); sys.exit(3)"))
    assert info.value.reason == "exit code 3"
    assert info.value.details["exit_code"] == 3 and "bad input" in info.value.details["output_tail"]


def test_timeout_kills_the_whole_process_group():
    # The child starts a grandchild holding the output pipe: the output is read only once the pipe closes,
    # within KILL_GRACE_S of the kill, which only a group kill does (else the tail is empty), and the
    # grandchild is gone (by its pid, polled: its reaping may lag on a loaded host).
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
            "print('started', p.pid, flush=True); time.sleep(600)")
    with pytest.raises(RunFailed, match="timed out after 0.5 s") as info:
        run_command(_spec(code, timeout=0.5))
    tail = info.value.details["output_tail"]
    assert tail.startswith("started ")
    assert _ends_within(int(tail.split()[1]), KILL_GRACE_S * 2)


def _ends_within(pid: int, timeout: float) -> bool:
    """Whether the process `pid` has ended (or is a zombie), polled for up to `timeout` s."""
    import psutil

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_env_switch_changes_only_the_named_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("STRATA_TEST_DROP", "x")
    # The child writes its whole environment to a file: printed, a long environment (PYTHONPATH and
    # friends) outgrows the 2000-character output tail and the JSON is cut off.
    dump = tmp_path / "env.json"
    code = f"import json, os; open({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))"
    spec = _spec(code, env={"STRATA_TEST_SWITCH": "1", "STRATA_TEST_DROP": None})
    run_command(spec)
    child = json.loads(dump.read_text())
    from strata_bench.ab.guard import TAG, TAG_ENV

    expected = dict(os.environ)
    expected.pop("STRATA_TEST_DROP")
    expected["STRATA_TEST_SWITCH"] = "1"
    expected[TAG_ENV] = TAG  # the one variable the A/B adds, the same in both arms: the watchdog's tag (guard.py)
    assert child == expected


def test_parse_env_and_argv():
    assert parse_env(["A=1", "B=", "C"]) == {"A": "1", "B": "", "C": None}
    with pytest.raises(InputError, match="NAME=VALUE"):
        parse_env(["1X=2"])
    assert command_argv("prog --name 'two words'", shell=False) == ("prog", "--name", "two words")
    assert command_argv("a | b", shell=True) == "a | b"
    with pytest.raises(InputError, match="cannot split"):
        command_argv("prog 'open", shell=False)
    with pytest.raises(InputError, match="command not found"):
        command_arm("A", CommandSpec(("strata-no-such-program-xyz",)))


def test_shell_mode_runs_through_sh():
    regex = compile_metric(r"v=(?P<value>\d+)")
    spec = CommandSpec("echo v=$((6 * 7))", shell=True, metric=regex)
    assert run_command(spec).value == 42


def test_command_ab_end_to_end(tmp_path):
    regex = compile_metric(r"v=(?P<value>\d+)")
    code = "import os; print('v=' + os.environ.get('STRATA_TEST_V', '10'))"
    spec_a = _spec(code, env={"STRATA_TEST_V": "10"}, metric=regex)
    spec_b = _spec(code, env={"STRATA_TEST_V": "11"}, metric=regex)
    plan = make_plan("abba", pairs=3, warmup=0, unit="")
    report = run_matrix([Combination("command", {}, spec_a, spec_b)], plan, tmp_path, {"devices": []})
    outcome = report.outcomes[0]
    assert outcome.comparison.paired.mean_diff == 1.0
    assert report.summary_path.parent == tmp_path / "cpu"
    summary = json.loads(report.summary_path.read_text())
    assert summary["kind"] == "ab" and summary["provenance"]["ab"]["B"]["env"] == {"STRATA_TEST_V": "11"}
    assert summary["summary"]["cases"][0]["verdict"] == "SLOWER"
