"""Who listens on a TCP port: a run measures its own server only, never one left over from before.

psutil lists every socket of the host but names the process only where this user may read it (its
own processes on Linux), so a holder may be known to exist and still be unnamed.
"""
from __future__ import annotations

import contextlib
import socket
from typing import Iterable

import psutil


def _listening(conns: Iterable, port: int) -> list:
    return [c for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]


def _connections(proc: psutil.Process) -> list:
    # Process.net_connections is psutil 6's name; connections the older one (the package allows 5.9).
    method = getattr(proc, "net_connections", None) or proc.connections
    return method(kind="inet")


def listens_in(procs: Iterable[psutil.Process], port: int) -> bool:
    """True when one of `procs` (a server's process tree) has a socket listening on `port`."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if _listening(_connections(proc), port):
                return True
    return False


def holder(port: int) -> str | None:
    """None when nothing listens on `port`; else who does: 'pid 123 (python3 serve.py --port 8080)', or
    'a process psutil cannot name' where the host hides it."""
    try:
        found = _listening(psutil.net_connections(kind="inet"), port)
    except (psutil.Error, OSError):  # some hosts refuse the whole table: ask the port itself
        found = []
    if not found:
        return "a process psutil cannot name" if _accepts(port) else None
    pid = next((c.pid for c in found if c.pid), None)
    return "a process psutil cannot name" if pid is None else describe(pid)


def describe(pid: int) -> str:
    """'pid 123 (the command line)', shortened; 'pid 123' when the process cannot be read."""
    try:
        cmdline = " ".join(psutil.Process(pid).cmdline()) or psutil.Process(pid).name()
    except psutil.Error:
        return f"pid {pid}"
    return f"pid {pid} ({cmdline[:117] + '...' if len(cmdline) > 120 else cmdline})"


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
        return True
    return False
