"""The A/B's watchdog: when the `ab` process dies, even by SIGKILL, it ends every process `ab` started.

It runs as a script of its own (`python watchdog.py`, never imported by the package), started once by
strata_bench.ab.guard, in a session of its own so a terminal's Ctrl-C or hang-up does not reach it.
`ab` writes one process id a line on its stdin for each process it starts (each leads a process group
of its own). Nothing else tells it that `ab` is gone: the kernel closes `ab`'s end of the pipe however
`ab` ended, so end-of-file is the signal.

At end-of-file it sends SIGTERM to every guarded process group still there and every descendant it
knows of, then SIGKILL after a grace. The group is what reaches a server its shell wrapper started: the
wrapper itself dies with `ab` (strata_bench.ab.guard asks the kernel for that), so by then the server
is no longer its descendant, but it is still in its group. Every second the watchdog also notes each
guarded process's descendants, so one that left the group (a daemon that called setsid) is known too.

At end-of-file it also ends every process whose environment carries the run's tag (argv: NAME VALUE; guard.py
sets it in every process `ab` starts, and descendants inherit it): a daemon that called setsid an instant
before `ab` died, and whose parent died with `ab`, is nobody's descendant any more, but it still has the tag.

Process ids: psutil.Process objects carry their start time, so a reused id is never signalled; a group
is forgotten at the first look that finds it empty, and Linux gives no new process the id of a group
that still has members, so a group id signalled is the guarded group.
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

import psutil

REFRESH_S = 1.0  # how often descendants are noted (a few ms of /proc reads each time)
GRACE_S = 2.0  # after SIGTERM, how long before SIGKILL


class Guarded:
    """The processes `ab` started (group leaders) and every descendant seen so far."""

    def __init__(self, tag: tuple[str, str] | None = None) -> None:
        self.roots: dict[int, psutil.Process] = {}
        self.seen: dict[int, psutil.Process] = {}
        self.tag = tag  # (variable, value) every process `ab` started carries

    def add(self, pid: int) -> None:
        with contextlib.suppress(psutil.Error):
            self.roots[pid] = self.seen[pid] = psutil.Process(pid)

    def refresh(self) -> None:
        """Note new descendants; forget processes (and roots) that are gone."""
        for root in list(self.roots.values()):
            with contextlib.suppress(psutil.Error):
                for child in root.children(recursive=True):
                    self.seen.setdefault(child.pid, child)
        self.seen = {pid: p for pid, p in self.seen.items() if _running(p)}
        self.roots = {pid: p for pid, p in self.roots.items() if _group_alive(pid)}

    def end_all(self) -> None:
        self.refresh()
        self.seen.update(tagged(self.tag) if self.tag else {})
        groups = list(self.roots)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pgid in groups:
                if _group_alive(pgid):
                    with contextlib.suppress(OSError):
                        os.killpg(pgid, sig)
            for p in self.seen.values():
                with contextlib.suppress(psutil.Error):
                    p.send_signal(sig)
            if sig == signal.SIGTERM:
                psutil.wait_procs(list(self.seen.values()), timeout=GRACE_S)
                self.refresh()


def tagged(tag: tuple[str, str]) -> dict[int, psutil.Process]:
    """Every process (of this user: another's environment cannot be read) whose environment carries `tag`."""
    name, value = tag
    found = {}
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if p.pid != os.getpid() and p.environ().get(name) == value:
                found[p.pid] = p
    return found


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _group_alive(pgid: int) -> bool:
    """True while some process (a zombie included) is in the group."""
    try:
        os.killpg(pgid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def watch(fd: int, guarded: Guarded) -> None:
    """Read process ids from `fd` until end-of-file, noting descendants every REFRESH_S."""
    pending = b""
    next_refresh = time.monotonic() + REFRESH_S
    while True:
        ready, _, _ = select.select([fd], [], [], REFRESH_S)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                if line.strip().isdigit():
                    guarded.add(int(line))
        if time.monotonic() >= next_refresh:
            guarded.refresh()
            next_refresh = time.monotonic() + REFRESH_S


def main() -> None:
    # Signals meant for `ab` (a terminal's Ctrl-C, a hang-up) must not end the one process that cleans up.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    guarded = Guarded(tuple(sys.argv[1:3]) if len(sys.argv) >= 3 else None)
    watch(sys.stdin.fileno(), guarded)
    guarded.end_all()


if __name__ == "__main__":
    main()
