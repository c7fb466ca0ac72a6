"""Processes of a command A/B: a run's whole process tree ended (psutil), shell hooks, SIGINT, SIGTERM
and SIGHUP as an interruption, and a server started fresh for one run and stopped with everything it started.

Every process the A/B starts comes from strata_bench.ab.guard.spawn: its own session (so its process
group can be signalled at once), and nothing left behind when `ab` itself dies. psutil also finds
descendants that left the group (a daemon that called setsid), which a group kill alone would leave
behind. A server counts as ready by port only when the listener is in its own process tree.
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Iterator, Mapping

import psutil

from strata_bench.ab.guard import spawn
from strata_bench.ab.ports import holder, listens_in

TERM_GRACE_S = 3.0  # after SIGTERM, how long a process tree gets before SIGKILL
SERVER_TAIL_LINES = 20


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: handled like Ctrl-C (the current run's tree ended, records kept, summary
    written); `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


class AbInterrupted(KeyboardInterrupt):
    """An A/B stopped by Ctrl-C, SIGTERM or SIGHUP after its records and partial summary were written;
    `signum` is None for Ctrl-C."""

    def __init__(self, records: str | None, summary: str | None, signum: int | None) -> None:
        super().__init__("interrupted")
        self.records, self.summary, self.signum = records, summary, signum

    @property
    def terminated(self) -> bool:
        return self.signum is not None


ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill, a closed terminal


@contextlib.contextmanager
def ending_signals() -> Iterator[None]:
    """While inside, SIGINT raises KeyboardInterrupt and SIGTERM or SIGHUP raise Terminated in the main
    thread, once: a later signal is ignored, so it cannot cut short the ending of the trees and the
    writing of the summary that the first one started. Outside: the old handlers."""
    raised = []

    def on_signal(signum, frame):
        if raised:
            return
        raised.append(signum)
        raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)

    try:
        # A signal ignored by whoever started `ab` (nohup ignores SIGHUP) stays ignored.
        old = {sig: signal.signal(sig, on_signal) for sig in ENDING_SIGNALS
               if signal.getsignal(sig) is not signal.SIG_IGN}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def tree(pid: int) -> list[psutil.Process]:
    """The process and every descendant still alive (empty when it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def end_tree(pid: int, grace: float = TERM_GRACE_S, procs: list[psutil.Process] | None = None) -> None:
    """SIGTERM the process group and every descendant, then SIGKILL whatever is left after `grace`."""
    procs = tree(pid) if procs is None else procs
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    alive = _wait_gone(procs, grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    _wait_gone(alive + _group_members(pid), grace)


def _group_members(pgid: int) -> list[psutil.Process]:
    """Processes still in the group, killed: a background child whose shell died first is reparented and
    missing from the tree walked before, and was seen to outlive the group's SIGTERM (a signal during --setup)."""
    members = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(p.pid) == pgid and p.pid != os.getpid():
                p.kill()
                members.append(p)
    return members


def _alive(p: psutil.Process) -> bool:
    """Running and not a zombie: a grandchild's zombie waits for a reaper this process is not (and a
    container's PID 1 may never reap it), so waiting for it to vanish would wait for nothing."""
    try:
        if p.status() == psutil.STATUS_ZOMBIE:
            with contextlib.suppress(ChildProcessError, psutil.Error):
                p.wait(timeout=0)  # our own child: reap it
            return False
        return p.is_running()
    except psutil.NoSuchProcess:
        return False


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited (zombies count as exited); those still alive after `timeout`."""
    deadline = time.perf_counter() + timeout
    alive = [p for p in procs if _alive(p)]
    while alive and time.perf_counter() < deadline:
        time.sleep(0.01)
        alive = [p for p in alive if _alive(p)]
    return alive


def run_hook(command: str, env: Mapping[str, str], timeout: float | None) -> tuple[int | None, str]:
    """Run a --prepare/--conclude/--setup/--cleanup command through /bin/sh; (exit code or None on
    timeout, its output)."""
    proc = spawn(command, env, shell=True)
    try:
        raw, _ = proc.communicate(timeout=timeout)
        return proc.returncode, (raw or b"").decode("utf-8", errors="replace")
    except subprocess.TimeoutExpired:
        end_tree(proc.pid, grace=0.5)
        return None, (proc.communicate()[0] or b"").decode("utf-8", errors="replace")
    except BaseException:
        end_tree(proc.pid, grace=0.5)
        raise


@dataclass(frozen=True)
class ServerSpec:
    """--server: the command, how to know it is ready, and how long to wait."""

    command: str
    ready: re.Pattern[str] | None = None  # a line of its output
    ready_port: int | None = None  # or a TCP port on 127.0.0.1 accepting connections
    ready_timeout: float = 60.0


class ServerFailed(Exception):
    """The server died or never became ready; `tail` holds its last output lines."""

    def __init__(self, reason: str, tail: str) -> None:
        super().__init__(reason)
        self.reason, self.tail = reason, tail


class Server:
    """One server process for one run; its output is read by a thread as it comes."""

    def __init__(self, spec: ServerSpec, env: Mapping[str, str]) -> None:
        self.spec = spec
        self.lines: list[str] = []
        self._ready_line = threading.Event()
        self.proc = spawn(spec.command, env, shell=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="surrogateescape").rstrip("\n")  # bytes kept for --same
            self.lines.append(line)
            if self.spec.ready is not None and self.spec.ready.search(line):
                self._ready_line.set()

    def tail(self, n: int = SERVER_TAIL_LINES) -> str:
        return _shown("\n".join(deque(self.lines, maxlen=n)))

    def wait_ready(self) -> float:
        """Seconds until ready; ServerFailed when it exits first or the timeout passes."""
        started = time.perf_counter()
        deadline = started + self.spec.ready_timeout
        while time.perf_counter() < deadline:
            if self._is_ready():
                return time.perf_counter() - started
            code = self.proc.poll()
            if code is not None:
                self._reader.join(timeout=1)
                raise ServerFailed(f"server exited with code {code} before it was ready", self.tail())
            time.sleep(0.02)
        raise ServerFailed(f"server not ready after {self.spec.ready_timeout:g} s "
                           f"({self._waiting_for()})", self.tail())

    def _is_ready(self) -> bool:
        if self.spec.ready is not None:
            return self._ready_line.is_set()
        # Any listener would do for a connection; only the server's own proves that this run's server is up.
        return listens_in(tree(self.proc.pid), self.spec.ready_port)

    def _waiting_for(self) -> str:
        if self.spec.ready is not None:
            return f"no line matched {self.spec.ready.pattern!r}"
        other = holder(self.spec.ready_port)
        held = f"; it is held by {other}, not by the server" if other else ""
        return f"no process of the server listens on port {self.spec.ready_port}{held}"

    def stop(self) -> str:
        """End the server's whole process tree; returns everything it printed."""
        end_tree(self.proc.pid)
        self._reader.join(timeout=2)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=1)
        return _shown(self.output())

    def output(self) -> str:
        """Everything it printed, undecodable bytes kept (as lone surrogates) for --metric and --same."""
        return "\n".join(self.lines)


def _shown(text: str) -> str:
    """Output for a tail or a display: bytes that are not UTF-8 as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
