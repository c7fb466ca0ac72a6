"""The slot's workspace: a tree copied in so that only changed files get new timestamps, under a lock.

`sync_tree` compares content (the sha256 of every build file, kept in a manifest beside the copy), not
timestamps: a file whose content is unchanged keeps its old timestamp even when the new tree's copy is
newer (a fresh checkout), so ninja does not rebuild it; a changed file is written now, later than every
object built from it, so ninja does, even when the new tree's copy is older. Files the new tree lacks
are removed.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Iterator

from strata_bench.errors import InputError

MANIFEST = "strata-manifest.json"


def sync_tree(tree: Path, dest: Path, digests: dict[str, str]) -> int:
    """Make `dest` hold exactly the build files of `tree`; returns how many files were written."""
    dest.mkdir(parents=True, exist_ok=True)
    manifest_path = dest.parent / MANIFEST
    try:
        before = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        before = {}
    written = 0
    # The manifest goes first, emptied: a copy cut short is then taken as unknown and copied again.
    manifest_path.write_text("{}")
    for rel, digest in digests.items():
        target = dest / rel
        if before.get(rel) == digest and target.is_file():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.is_dir():
            _remove(target)
        shutil.copyfile(tree / rel, target)  # a new file: timestamp now
        shutil.copymode(tree / rel, target)
        written += 1
    for rel in set(before) - set(digests):
        with contextlib.suppress(FileNotFoundError):
            _remove(dest / rel)
    manifest_path.write_text(json.dumps(digests, sort_keys=True))
    return written


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


@contextlib.contextmanager
def locked(slot: Path) -> Iterator[None]:
    """Hold the slot for one build; InputError when another build holds it."""
    slot.mkdir(parents=True, exist_ok=True)
    fd = os.open(slot / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"another engine build is using {slot}: wait for it to finish") from None
        yield
    finally:
        os.close(fd)
