"""Writing into the cubin cache, which several builds share at once: compile's worker threads (one
process, so one pid) and other processes. Whatever is written goes to a name of its own first
(tempfile's, unique per call, never `<name>.tmp<pid>`, which two threads of one process share) and is
then renamed into place, so a reader sees all of it or nothing.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Mapping


def publish_folder(folder: Path, files: Mapping[str, bytes]) -> Path:
    """`folder` holding `files` (name -> bytes), written once: where it is already there it is kept, and
    where another build renames its own copy into place first, that copy is."""
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{folder.name}.tmp", dir=folder.parent))
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        os.chmod(staging, 0o755)  # as a folder made by mkdir would be, not mkdtemp's 0700
        os.replace(staging, folder)
    except OSError:
        if not folder.is_dir():  # not another build's copy in place: a real failure
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already where the rename succeeded
    return folder


def replace_file(path: Path, data: bytes) -> None:
    """`path` holding `data`, renamed into place from a temporary file of its own."""
    fd, tmp = tempfile.mkstemp(prefix=f"{path.name}.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
