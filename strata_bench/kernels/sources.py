"""Where the kernel sources live and the one hash that names them."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".inc")


def kernels_dir() -> Path:
    """kernels_src/ beside the package (a source checkout), or $STRATA_KERNELS_SRC."""
    return Path(os.environ.get("STRATA_KERNELS_SRC", REPO_ROOT / "kernels_src")).resolve()


def source_files(root: Path | None = None) -> list[Path]:
    root = kernels_dir() if root is None else root
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)


def kernels_src_hash(root: Path | None = None) -> str:
    """sha256 over every source and header (relative path + bytes), so any edit changes it."""
    root = kernels_dir() if root is None else root
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
