"""A source's include closure: every file a compile of it reads, and the cache key over those bytes.

The include path is the compile's own: a quoted include is looked up in the including file's folder,
then in each -I folder in the order the options give them; an angle include is looked up in the -I
folders only. The first folder that has the file wins, as in the compiler. (For the main file NVRTC
looks beside its program name, read from the working directory: compile_source names a built-in source
relative to its root, a folder that exists only when run from the root, where it is the source's own.
The scan uses the source's own folder.)

This is a scan, not a preprocessor: every #include line counts, whatever #if or comment surrounds it,
so the closure can hold a header the compile skips, never miss one it reads. A superset only costs a
spurious rebuild; a missed header would serve a stale cubin. Where a file includes through a macro
(`#include HEADER`), which a scan cannot resolve, every source file under every folder of the path
(the toolkit's aside) is taken instead. `__has_include` is not followed.

Toolkit headers (those found in a CUDA include folder: cuda_fp16.h, mma.h) are not followed: they are
keyed by name, the folder they come from and the bytes of the header named, with the compiler's version,
rather than by the bytes of everything they include. An angle include found nowhere (one NVRTC builds
in, such as stdint.h) is keyed by its name and the compiler's version alone.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from strata_bench.kernels.sources import SOURCE_SUFFIXES

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include(_next)?[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_COMPUTED = re.compile(r'^[ \t]*#[ \t]*include(?:_next)?[ \t]+[^<"\s]', re.M)  # #include MACRO


@dataclass(frozen=True)
class ClosureFile:
    """A file the compile reads: its resolved path and the sha256 of its bytes."""

    path: Path
    sha256: str


@dataclass(frozen=True)
class SystemHeader:
    """A toolkit header, as included (`cuda_fp16.h`); path None: none of the folders has it (a built-in)."""

    name: str
    path: Path | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class SourceClosure:
    """What one compile of `source` reads: `files` (the source and every header it reaches, by path),
    the toolkit headers it names, and the quoted includes no folder has (under an #if not taken, or a
    compile error to come: a file that appears there later changes the closure)."""

    source: Path
    files: tuple[ClosureFile, ...]
    system: tuple[SystemHeader, ...] = ()
    missing: tuple[str, ...] = ()


def include_dirs(options: Sequence[str]) -> list[Path]:
    """The -I folders of an option list, in order (`-IDIR`, `-I DIR`, `--include-path=DIR`); a relative
    folder is read from the working directory, as the compiler reads it."""
    values = _option_values(options, "-I", "--include-path", joined=True)
    return list(dict.fromkeys(Path(v).resolve() for v in values))


def pre_includes(options: Sequence[str]) -> list[str]:
    """Headers the options include before the source (`--pre-include=H`, `-include H`)."""
    return _option_values(options, "-include", "--pre-include", joined=False)


def _option_values(options: Sequence[str], short: str, long: str, joined: bool) -> list[str]:
    """The values of one option: `SHORT VALUE`, `LONG VALUE`, `LONG=VALUE`, and `SHORTVALUE` if joined."""
    out, pending = [], False
    for opt in options:
        if pending:
            out.append(opt)
            pending = False
        elif opt in (short, long):
            pending = True
        elif opt.startswith(long + "="):
            out.append(opt.split("=", 1)[1])
        elif joined and opt.startswith(short):
            out.append(opt[len(short):])
    return [v for v in out if v]


def scan(source: Path, options: Sequence[str], system_dirs: Iterable[str | Path] = ()) -> SourceClosure:
    """The include closure of one compile of `source` with `options` (see the module docstring).
    `system_dirs`: the CUDA include folders, whose headers are named, not followed."""
    source = Path(source).resolve()
    search = include_dirs(options)
    walk = _Walk(search, {Path(d).resolve() for d in system_dirs})
    pre = [hit.path for name in pre_includes(options) for hit in _lookup(name, [source.parent, *search])[:1]]
    todo = [source, *pre]
    while todo:
        path = todo.pop()
        if path not in walk.files and path.is_file():
            todo += walk.read(path)
    return SourceClosure(source, tuple(ClosureFile(p, h) for p, h in sorted(walk.files.items())),
                         tuple(sorted(walk.headers.values(), key=lambda h: h.name)), tuple(sorted(walk.missing)))


@dataclass
class _Walk:
    """The state of one scan: what has been read, named and not found."""

    search: list[Path]
    system: set[Path]
    files: dict[Path, str] = field(default_factory=dict)
    headers: dict[str, SystemHeader] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)

    def read(self, path: Path) -> list[Path]:
        """Hash one file; the files its includes reach that are still to read."""
        data = path.read_bytes()
        self.files[path] = hashlib.sha256(data).hexdigest()
        text = data.decode("utf-8", errors="replace")
        todo = []
        for nxt, kind, name in _INCLUDE.findall(text):
            dirs = ([path.parent] if kind == '"' else []) + self.search
            # #include_next takes a later folder than the current one: every match is a safe superset.
            found = _lookup(name, dirs) if nxt else _lookup(name, dirs)[:1]
            if not found and kind == "<":
                self.headers.setdefault(name, SystemHeader(name))
            elif not found:
                self.missing.add(name)
            for hit in found:
                if hit.folder in self.system:
                    self.headers[name] = SystemHeader(name, hit.path, _sha256(hit.path))
                else:
                    todo.append(hit.path)
        if _COMPUTED.search(text):
            todo += _every_source(d for d in [path.parent, *self.search] if d not in self.system)
        return todo


@dataclass(frozen=True)
class _Hit:
    folder: Path  # the search folder that has the file
    path: Path


def _lookup(name: str, dirs: Sequence[Path]) -> list[_Hit]:
    return [_Hit(d, (d / name).resolve()) for d in dirs if (d / name).is_file()]


def _every_source(dirs: Iterable[Path]) -> list[Path]:
    return sorted(p.resolve() for d in dirs for p in d.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cache_key(closure: SourceClosure, options: Sequence[str], compiler_version: str,
              name_expressions: Sequence[str] = ()) -> str:
    """sha256 over every byte a compile reads (the closure's files, by resolved path), how it reads
    them (the options, verbatim and in order), the compiler that reads them ("nvrtc 13.0") and the
    names it is asked to lower (NVRTC's name expressions). Any compiler path (NVRTC, nvcc) keys its
    cache through this one function."""
    blob = json.dumps({
        "source": str(closure.source),
        "files": [[str(f.path), f.sha256] for f in closure.files],
        "system": [[h.name, None if h.path is None else str(h.path), h.sha256] for h in closure.system],
        "missing": list(closure.missing),
        "options": list(options),
        "compiler": compiler_version,
        "names": list(name_expressions),
    }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()
