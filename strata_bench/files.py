"""A user's input file is read only when it is a regular file of a bounded size.

A FIFO where a file is expected blocks open() until a writer comes, for ever; a device, or a file of many
GB, fills memory. Both are refused from the file's metadata before a byte is read, in one line. A path
option's type refuses the empty string before any command runs.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

import click

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


def write_problem(path: str | os.PathLike) -> str | None:
    """Why a run could not write the file `path` at its end (None: it can), found before the run: the run
    is not spent for an output that then fails. The file is opened as the writer will, without changing
    it (os.access says yes to root for any file, and knows nothing of a read-only file system); one made
    for the probe is removed."""
    text = os.fspath(path)
    if not text:
        return "the path is empty"
    target = Path(text)
    try:
        if target.is_dir():
            return "it is a folder"
        folder = target.absolute().parent
        if not folder.is_dir():
            return f"{folder} {'is not a folder' if folder.exists() else 'does not exist'}"
        _probe(target)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _probe(target: Path) -> None:
    try:  # an existing file: opened for appending, left as it is (non-blocking: a FIFO without a reader fails)
        os.close(os.open(target, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
    except FileNotFoundError:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        target.unlink()


class UserPath(click.Path):
    """The type of every path option and argument: click.Path, less the empty string. click takes '' as a
    path and Path('') is '.', so `ab --results ''` wrote into the working folder and `--cases ''` was taken
    as no file at all; here it is one usage line naming the option, before anything runs."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value:
            raise InputError(f"{_spelled(param)} '': the path is empty")
        return super().convert(value, param, ctx)


def _spelled(param: click.Parameter | None) -> str:
    """An option by its long flag (--results), an argument by its name in the usage line (FILE)."""
    if isinstance(param, click.Option):
        return next((o for o in param.opts if o.startswith("--")), param.opts[0])
    return param.human_readable_name if param is not None else "path"
