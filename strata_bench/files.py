"""A user's input file is read only when it is a regular file of a bounded size.

A FIFO where a file is expected blocks open() until a writer comes, for ever; a device, or a file of many
GB, fills memory. Both are refused from the file's metadata before a byte is read, in one line.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from strata_bench.errors import InputError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def regular_size(path: str | Path, what: str, limit: int) -> int:
    """The size of `path`, a regular file of at most `limit` bytes; InputError starting with `what` (the
    file as messages name it) otherwise."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise InputError(f"{what}: cannot read it ({exc.strerror})") from None
    _check(info, what, limit)
    return info.st_size


def read_regular(path: str | Path, what: str, limit: int) -> bytes:
    """The bytes of `path`, checked as regular_size checks it."""
    regular_size(path, what, limit)
    try:
        # Non-blocking: were the path swapped for a FIFO since the stat, open returns and fstat refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"{what}: cannot read it ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        _check(os.fstat(fd), what, limit)
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{what}: grew past {limit} bytes while it was read")
    return data


def _check(info: os.stat_result, what: str, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
        raise InputError(f"{what}: not a regular file ({kind})")
    if info.st_size > limit:
        raise InputError(f"{what}: {info.st_size} bytes, more than the {limit} bytes read here")
