"""An exception no handler expected: one line and an exit code; the traceback only under --debug.

A user's --cases file is code the tool runs: an exception raised there, or by a call it made with bad
arguments, is bad input, named by the file and line of its deepest frame in that file (exit 2). Anything
else is a defect of the tool: one line naming the exception and where it was raised (exit 1).
"""
from __future__ import annotations

import traceback
from pathlib import Path

from strata_bench.cases.registry import user_case_files

EXIT_FAIL, EXIT_USAGE = 1, 2
_MAX_MESSAGE = 300


def crash_line(exc: BaseException) -> tuple[str, int]:
    """(the line to print, the exit code) for `exc`."""
    frames = traceback.extract_tb(exc.__traceback__)
    users = user_case_files()
    theirs = [f for f in frames if _resolved(f.filename) in users]
    if theirs:
        return f"{theirs[-1].filename}:{theirs[-1].lineno}: the case file raised {_what(exc)}", EXIT_USAGE
    where = f" at {_shown(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return (f"internal error{where}: {_what(exc)} (strata-bench --debug ... shows the traceback)", EXIT_FAIL)


def _what(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0][:_MAX_MESSAGE] if lines else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _resolved(filename: str) -> str:
    try:
        return str(Path(filename).resolve())
    except (OSError, RuntimeError):
        return filename


def _shown(filename: str) -> str:
    """A file of this package by its path in it (strata_bench/cli/main.py); any other as given."""
    parts = Path(filename).parts
    return "/".join(parts[len(parts) - parts[::-1].index("strata_bench") - 1:]) if "strata_bench" in parts \
        else filename
