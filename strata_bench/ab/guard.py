"""Starting an A/B's processes so that none outlives `ab`, however `ab` ends.

Each process gets a session (so a process group) of its own, so its whole group can be signalled at
once and a terminal's signals reach `ab` alone. Two things cover `ab`'s own death, SIGKILL included,
where no handler of `ab` runs:
  - on Linux the child asks the kernel for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG);
    that reaches the direct child only, a shell wrapper, not the server the wrapper started;
  - a watchdog process (strata_bench/ab/watchdog.py), told every process id `ab` starts, ends their
    groups and descendants when `ab`'s end of a pipe closes.
Every process `ab` starts carries TAG_ENV=<this run's tag> in its environment, which its descendants
inherit, sessions of their own included: the watchdog ends every process that carries it, so a daemon that
called setsid an instant before `ab` was killed (its parent gone, no longer anyone's descendant) is ended
too. The tag is the only variable the A/B adds, the same in both arms.
"""
from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Mapping, Sequence

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
WATCHDOG = Path(__file__).with_name("watchdog.py")
TAG_ENV = "STRATA_AB_TAG"
TAG = f"{os.getpid()}-{secrets.token_hex(8)}"  # this process's: a child `ab` draws its own

_watchdog: subprocess.Popen | None = None
_lock = threading.Lock()


def _pdeathsig_hook() -> Callable[[], None] | None:
    """A preexec_fn asking for SIGKILL at the parent's death; None off Linux or without libc's prctl."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    parent = os.getpid()

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def _preexec() -> Callable[[], None] | None:
    # The kernel sends the death signal when the *thread* that forked exits: only the main thread lives as
    # long as `ab`, so a process started from another thread relies on the watchdog alone.
    if threading.current_thread() is not threading.main_thread():
        return None
    return _pdeathsig_hook()


def spawn(args: str | Sequence[str], env: Mapping[str, str], shell: bool = False) -> subprocess.Popen:
    """Start one process of the A/B (stdout and stderr into one pipe, no stdin), guarded as above."""
    # The watchdog first: its start takes a while, and a signal then must not find a child it was not told of.
    with _lock:
        _ensure_watchdog()
    proc = subprocess.Popen(args, shell=shell, env={**env, TAG_ENV: TAG}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=_preexec())
    try:
        _tell_watchdog(proc.pid)
    except BaseException:  # a signal between the start and the caller's own handling: end it here
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    return proc


def _ensure_watchdog() -> None:
    global _watchdog
    if _watchdog is None or _watchdog.poll() is not None:  # none yet, or one killed by hand
        _watchdog = _start_watchdog()


def _tell_watchdog(pid: int) -> None:
    global _watchdog
    with _lock:
        for _ in range(2):  # a watchdog that died meanwhile is replaced once
            _ensure_watchdog()
            if _watchdog is None:
                return
            try:
                _watchdog.stdin.write(f"{pid}\n".encode())
                _watchdog.stdin.flush()
                return
            except (BrokenPipeError, OSError):
                _watchdog = None


def _start_watchdog() -> subprocess.Popen | None:
    """The watchdog, or None where it cannot start (then the death signal alone remains)."""
    try:
        return subprocess.Popen([sys.executable, str(WATCHDOG), TAG_ENV, TAG], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None


def watchdog_pid() -> int | None:
    """The running watchdog's process id (tests check that it ends what `ab` leaves)."""
    with contextlib.suppress(AttributeError):
        return _watchdog.pid if _watchdog.poll() is None else None
    return None
