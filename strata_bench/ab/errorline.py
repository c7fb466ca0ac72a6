"""The line of a failed run's output worth showing: the first that looks like an error.

A server that fails prints its error early ("bind: address already in use") and then its shutdown
messages; its last line says nothing about why. A Python traceback's first line names no error, its
last one does, and the word list below matches the last one ("ValueError: ...").
"""
from __future__ import annotations

import re
from typing import Iterable

ERROR_WORDS = re.compile(
    r"\b(errors?|fatal|failed|failure|exception|panic|abort(?:ed)?|cannot|can't|could not|unable|refused|"
    r"denied|not found|no such|in use|out of memory|segmentation fault|killed)\b|error:", re.IGNORECASE)


def first_error_line(texts: Iterable[str]) -> str | None:
    """The first line of the first text holding one that looks like an error; None when none does."""
    for text in texts:
        for line in (text or "").splitlines():
            if ERROR_WORDS.search(line):
                return line.strip()
    return None


def shown_line(details: dict, width: int = 160) -> str:
    """The line a failure shows: the recorded error line, else the first error-looking line of the
    command's and the server's output, else the command's last line ('' when it printed nothing)."""
    tails = [str(details.get("output_tail") or ""), str(details.get("server_tail") or "")]
    line = details.get("error_line") or first_error_line(tails)
    if not line:
        last = tails[0].strip().splitlines()
        line = last[-1] if last else ""
    return str(line).strip()[:width]
