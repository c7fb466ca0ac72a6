"""Process hygiene: a run's whole tree ended (even a descendant that left the group), and SIGTERM
handled like Ctrl-C: the tree ended, records kept, the summary written with interrupted: true."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from strata_bench.ab.arms import RunFailed
from strata_bench.ab.command import CommandSpec, run_command
from strata_bench.ab.process import end_tree, tree

PY = sys.executable
ENGINE = str(Path(__file__).resolve().parents[1] / "fake_engine.py")
# A child that starts a grandchild in a session of its own (out of the group), which writes its pid.
ESCAPE = ("import subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import os, sys, time; os.setsid(); "
          "open(sys.argv[1], \"w\").write(str(os.getpid())); time.sleep(600)', sys.argv[1]]); time.sleep(600)")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _all_gone(pids, timeout: float = 10.0) -> bool:
    """Whether every pid has ended, polled for up to `timeout` s: a signalled process is reaped a moment
    after the command that ended it returns, later on a loaded host (asserted at once, this once failed)."""
    deadline = time.time() + timeout
    while not all(_gone(pid) for pid in pids) and time.time() < deadline:
        time.sleep(0.05)
    return all(_gone(pid) for pid in pids)


def _wait_for(path: Path, timeout: float = 10.0) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def test_timeout_ends_a_descendant_that_left_the_process_group(tmp_path):
    pid_file = tmp_path / "pid"
    with pytest.raises(RunFailed, match="timed out after 1 s"):
        run_command(CommandSpec((PY, "-c", ESCAPE, str(pid_file)), timeout=1.0))
    assert _all_gone([int(_wait_for(pid_file))])


def test_end_tree_ends_every_descendant():
    proc = subprocess.Popen([PY, "-c", "import subprocess, sys, time; "
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"],
                            start_new_session=True)
    deadline = time.time() + 10
    while len(tree(proc.pid)) < 2 and time.time() < deadline:
        time.sleep(0.02)
    procs = tree(proc.pid)
    assert len(procs) == 2
    end_tree(proc.pid)
    proc.wait(timeout=5)
    assert _all_gone([p.pid for p in procs])


def test_sigterm_ends_the_run_keeps_records_and_writes_the_summary(tmp_path):
    pids = tmp_path / "pids"
    env = {**os.environ, "FAKE_PIDS_FILE": str(pids), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cli = [PY, "-c", "from strata_bench.cli.main import cli; cli()", "ab", "--results", str(tmp_path / "res"), "-q",
           "--pairs", "3", "--warmup", "0", "--env-b", "FAKE_HANG=1", "--metric", r"([0-9.]+) tokens/s",
           "--", PY, ENGINE, "run"]
    proc = subprocess.Popen(cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(pids, timeout=30)  # run 1 (B) hangs with a child
    hung = [int(p) for p in pids.read_text().split()]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 143, err
    records = next((tmp_path / "res").rglob("ab-*.jsonl"))
    summary = records.with_suffix(".json")
    assert f"terminated (SIGTERM): records kept in {records}; summary (interrupted: true) in {summary}" in err
    assert json.loads(summary.read_text())["summary"]["interrupted"] is True
    kinds = [json.loads(line)["record"] for line in records.read_text().splitlines()]
    assert kinds == ["plan", "run", "interrupted"]
    assert _all_gone(hung)


def _listener():
    """A socket listening on a free port of 127.0.0.1, held by this test process (a stale server)."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


def test_a_listener_outside_the_server_tree_is_not_ready():
    from strata_bench.ab.ports import describe
    from strata_bench.ab.process import Server, ServerFailed, ServerSpec

    sock, port = _listener()
    with sock:
        server = Server(ServerSpec("sleep 30", ready_port=port, ready_timeout=1.0), os.environ)
        try:
            with pytest.raises(ServerFailed) as info:
                server.wait_ready()
        finally:
            server.stop()
    assert info.value.reason == (f"server not ready after 1 s (no process of the server listens on port {port}; "
                                 f"it is held by {describe(os.getpid())}, not by the server)")


def test_a_run_whose_port_was_taken_fails_without_starting_its_server(tmp_path):
    from strata_bench.ab.ports import describe
    from strata_bench.ab.process import ServerSpec

    sock, port = _listener()
    started = tmp_path / "started"
    spec = CommandSpec(("true",), server=ServerSpec(f"touch {started}; sleep 30", ready_port=port))
    with sock, pytest.raises(RunFailed) as info:
        run_command(spec)
    assert info.value.reason == f"port {port} is in use by {describe(os.getpid())} before the server started"
    assert not started.exists()


def test_the_server_own_listener_is_ready():
    from strata_bench.ab.process import Server, ServerSpec

    port = _free_port()
    server = Server(ServerSpec(f"{PY} {ENGINE} serve --port {port}", ready_port=port, ready_timeout=20), os.environ)
    try:
        assert server.wait_ready() < 20
    finally:
        server.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pids(path: Path) -> list[int]:
    return [int(p) for line in path.read_text().splitlines() for p in line.split()]


def test_sigkill_of_ab_leaves_no_server_wrapper_client_or_worker(tmp_path):
    """`ab` killed by SIGKILL runs no handler: the death signal and the watchdog end what it started."""
    port = _free_port()
    pids = tmp_path / "pids"
    env = {**os.environ, "FAKE_PIDS_FILE": str(pids), "FAKE_HANG": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    # `; true` keeps the shell as the server's wrapper (a shell may exec a lone command instead).
    ab = subprocess.Popen([PY, "-m", "strata_bench", "ab", "--results", str(tmp_path / "res"), "-q", "--pairs", "2",
                           "--warmup", "0", "--server", f"{PY} {ENGINE} serve --port {port}; true",
                           "--ready-port", str(port), "--", PY, ENGINE, "client", "--port", str(port)],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not (pids.exists() and len(pids.read_text().splitlines()) >= 2):
        time.sleep(0.05)  # the server wrote "server worker", the hanging client "client"
    server, worker, client = _pids(pids)
    started = psutil.Process(ab.pid).children(recursive=True)
    wrapper = psutil.Process(server).ppid()
    assert {server, worker, client, wrapper} <= {p.pid for p in started} and wrapper != ab.pid
    ab.kill()
    ab.wait(timeout=10)
    deadline = time.time() + 15
    while time.time() < deadline and not all(_gone(p.pid) for p in started):
        time.sleep(0.1)
    left = [(p.pid, p.cmdline()) for p in started if not _gone(p.pid)]
    assert left == []  # the watchdog too has finished and gone
    from strata_bench.ab.ports import holder

    assert holder(port) is None


def test_sigkill_of_ab_leaves_no_setsid_grandchild_started_just_before(tmp_path):
    """A daemon that leaves its session an instant before `ab` is killed is nobody's descendant by the time
    the watchdog looks; it still carries the run's tag, so the watchdog ends it (issue 34: it outlived ab)."""
    pids = tmp_path / "pids"
    ab = _start_ab(tmp_path, "--pairs", "2", "--warmup", "0", "--shell", "--a",
                   f"setsid sleep 600 & echo $! > {pids}; sleep 600", "--b", "true")
    daemon = int(_wait_for(pids, timeout=60))
    ab.kill()  # at once: no refresh of the watchdog has seen the daemon
    ab.wait(timeout=10)
    assert _all_gone([daemon], timeout=15), psutil.Process(daemon).cmdline()


def _start_ab(tmp_path, *args, env=None):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **(env or {})}
    return subprocess.Popen([PY, "-m", "strata_bench", "ab", "--results", str(tmp_path / "res"), "-q", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_a_signal_during_setup_ends_its_tree_runs_cleanup_and_writes_the_summary(tmp_path, sig, code):
    pids, cleaned = tmp_path / "pids", tmp_path / "cleaned"
    ab = _start_ab(tmp_path, "--pairs", "2", "--setup", f"sleep 600 & echo $$ $! > {pids}; wait",
                   "--cleanup", f"touch {cleaned}", "--", "true")
    hung = [int(p) for p in _wait_for(pids, timeout=60).split()]  # the setup's shell and its child
    ab.send_signal(sig)
    out, err = ab.communicate(timeout=30)
    assert ab.returncode == code, err
    records = next((tmp_path / "res").rglob("ab-*.jsonl"))
    summary = records.with_suffix(".json")
    why = "interrupted" if sig == signal.SIGINT else f"terminated ({sig.name})"
    assert f"{why}: records kept in {records}; summary (interrupted: true) in {summary}" in err
    body = json.loads(summary.read_text())["summary"]
    assert body["interrupted"] is True and [c["runs"] for c in body["cases"]] == [0]
    assert _all_gone(hung) and cleaned.exists()


def test_sighup_during_a_run_ends_its_tree_and_writes_the_summary(tmp_path):
    pids = tmp_path / "pids"
    ab = _start_ab(tmp_path, "--pairs", "3", "--warmup", "0", "--env-b", "FAKE_HANG=1", "--metric",
                   r"([0-9.]+) tokens/s", "--", PY, ENGINE, "run", env={"FAKE_PIDS_FILE": str(pids)})
    hung = [int(p) for p in _wait_for(pids, timeout=60).split()]  # run 1 (B) hangs with a child
    ab.send_signal(signal.SIGHUP)
    out, err = ab.communicate(timeout=30)
    assert ab.returncode == 129, err
    summary = next((tmp_path / "res").rglob("ab-*.json"))
    assert json.loads(summary.read_text())["summary"]["interrupted"] is True
    assert _all_gone(hung)


def test_a_failing_setup_is_one_line_exit_2_and_the_summary_is_written(tmp_path):
    ab = _start_ab(tmp_path, "--a", "true", "--b", "true", "--pairs", "2", "--setup", "exit 7")
    try:
        out, err = ab.communicate(timeout=60)  # the session ended in a crash raised from itself: it hung here
    finally:
        ab.kill()  # a hung ab must not outlive the test
    assert (ab.returncode, err) == (2, "--setup failed (exit code 7): exit 7\n")
    summary = next((tmp_path / "res").rglob("ab-*.json"))
    assert json.loads(summary.read_text())["summary"]["interrupted"] is True
