"""A llama.cpp source tree: recognized, its A/B targets found, and the files that decide a build hashed.

Only the files a CUDA build of the A/B targets reads are hashed and copied into the build workspace:
everything except version control, CI, docs, models, Python packages and earlier build folders (a deny
list, so a new source folder in a later llama.cpp is never missed). Hashing reads every such byte
(about 60 MB in a 2026 tree, well under a second): content, not timestamps, so a fresh checkout of the
same commit hits the cache.
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from strata_bench.errors import InputError

# Top-level entries that no CUDA build of the tools reads.
# (tests/ is read only with LLAMA_BUILD_TESTS, which the build turns off; pocs/ is read with the examples.)
SKIPPED_TOP = frozenset({".git", ".github", ".devops", ".gemini", "docs", "media", "models", "gguf-py", "grammars",
                         "prompts", "requirements", "tests", "ci"})
SKIPPED_ANY = frozenset({".git", "__pycache__", "node_modules", ".venv", "venv", ".cache"})
# The executables the engine A/B runs; (a, b) means the first of them the tree has.
WANTED_TARGETS: tuple[str | tuple[str, ...], ...] = (
    "llama-bench", ("llama-completion", "llama-cli"), "llama-perplexity", "llama-quantize", "llama-imatrix",
    "llama-server")
_PROJECT = re.compile(r"project\s*\(\s*\"?llama\.cpp\"?", re.IGNORECASE)
_TARGET = re.compile(r"(?:set\s*\(\s*TARGET\s+|add_executable\s*\(\s*)(llama-[A-Za-z0-9_-]+)")


@dataclass(frozen=True)
class LlamaTree:
    """A checked llama.cpp tree: its root and the executables its CMake files define."""

    root: Path
    executables: frozenset[str]

    def targets(self) -> tuple[str, ...]:
        """The A/B targets this tree builds (llama-completion where it has one, else llama-cli)."""
        out = []
        for wanted in WANTED_TARGETS:
            choices = wanted if isinstance(wanted, tuple) else (wanted,)
            found = next((t for t in choices if t in self.executables), None)
            if found is None:
                raise InputError(f"{self.root} is a llama.cpp tree without {' or '.join(choices)} "
                                 f"(its executables: {', '.join(sorted(self.executables)) or 'none'})")
            out.append(found)
        return tuple(out)


def open_tree(path: str | Path) -> LlamaTree:
    """The tree at `path`; InputError (one line, naming the path) when it is not a llama.cpp tree."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise InputError(f"engine tree is not a folder: {str(path)!r}")
    cmake = root / "CMakeLists.txt"
    text = cmake.read_text(encoding="utf-8", errors="replace") if cmake.is_file() else ""
    if not _PROJECT.search(text) or not (root / "ggml" / "CMakeLists.txt").is_file():
        raise InputError(f"not a llama.cpp tree (no CMakeLists.txt with project(\"llama.cpp\") and ggml/): "
                         f"{str(path)!r}")
    if not (root / "ggml" / "src" / "ggml-cuda").is_dir():
        raise InputError(f"llama.cpp tree without ggml/src/ggml-cuda (no CUDA backend to build): {str(path)!r}")
    return LlamaTree(root.resolve(), frozenset(_executables(root)))


def _executables(root: Path) -> set[str]:
    names: set[str] = set()
    for folder in ("tools", "examples"):
        for cmake in sorted((root / folder).glob("**/CMakeLists.txt")):
            names.update(_TARGET.findall(cmake.read_text(encoding="utf-8", errors="replace")))
    return names


def build_files(root: Path) -> Iterator[Path]:
    """The files a build reads, relative to `root`, sorted (so the hash is stable)."""
    for top in sorted(os.listdir(root)):
        if top in SKIPPED_TOP or top.startswith("build") or top in SKIPPED_ANY:
            continue
        path = root / top
        if path.is_file() and not path.is_symlink():
            yield Path(top)
        elif path.is_dir() and not path.is_symlink():
            yield from _walk(root, Path(top))


def _walk(root: Path, rel: Path) -> Iterator[Path]:
    entries = sorted(os.scandir(root / rel), key=lambda e: e.name)
    for entry in entries:
        if entry.name in SKIPPED_ANY:
            continue
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(root, rel / entry.name)
        elif entry.is_file(follow_symlinks=False):
            yield rel / entry.name


def file_digests(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every build file."""
    out = {}
    for rel in build_files(root):
        with open(root / rel, "rb") as f:
            out[rel.as_posix()] = hashlib.file_digest(f, "sha256").hexdigest()
    return out


def content_hash(digests: dict[str, str]) -> str:
    """One sha256 over every build file's path and content."""
    h = hashlib.sha256()
    for rel in sorted(digests):
        h.update(rel.encode() + b"\0" + digests[rel].encode() + b"\n")
    return h.hexdigest()


def pack(root: Path, out: Path) -> tuple[int, int]:
    """Write the build files of the tree at `root` to the gzip tarball `out` (paths relative to the tree):
    what a GPU host without the internet needs to build it. Returns (files, bytes written)."""
    import tarfile

    files = list(build_files(root))
    with tarfile.open(out, "w:gz") as tar:
        for rel in files:
            tar.add(root / rel, arcname=rel.as_posix(), recursive=False)
    return len(files), out.stat().st_size
