"""Where the kernel sources live and the one hash that names them."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = PACKAGE_DIR.parent
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".inc")


def builtin_data(name: str) -> Path:
    """A built-in data folder ("kernels_src", "fixtures"): the checkout's own where the package runs from a
    source checkout, else the copy a wheel ships as package data (strata_bench/builtin_<name>, read-only)."""
    checkout = REPO_ROOT / name
    if (REPO_ROOT / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    return PACKAGE_DIR / f"builtin_{name}"


def builtin_kernels_dir() -> Path:
    """This project's own kernels_src (a checkout's, or the wheel's package data), whatever
    $STRATA_KERNELS_SRC says: a compile error there is a defect of the tool, not the user's input."""
    return Path(builtin_data("kernels_src")).resolve()


def is_builtin_source(path: Path) -> bool:
    return Path(path).resolve().is_relative_to(builtin_kernels_dir())


def kernels_dir() -> Path:
    """$STRATA_KERNELS_SRC, else the built-in kernels_src (a checkout's, or the wheel's package data)."""
    return Path(os.environ.get("STRATA_KERNELS_SRC") or builtin_data("kernels_src")).resolve()


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
