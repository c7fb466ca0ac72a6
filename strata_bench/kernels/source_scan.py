"""What a kernel source declares, read from its text on the CPU: the `__global__` functions of a `.cu`
and of the headers it includes with quotes, and each one's parameter count.

Why: a TOML variant's kernel name and argument list are checked when the file is read (`--list`,
`compile`), so a mistyped name is one line naming the TOML key instead of a compiler's page of
`__nv_name_map` errors, and a short argument list is caught before a launch reads past it. This is a
text scan, not a parser: a kernel it cannot see (made by a macro) is not refused here, and the cubin's
parameter table (toml_abi/abi_check.py) checks every launch exactly once it is compiled.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
_ATTRIBUTE = re.compile(r"__(?:launch_bounds|maxnreg|cluster_dims)__\s*\((?:[^()]|\([^()]*\))*\)")
_GLOBAL = re.compile(r"__global__\b([^;{}]*?)\b([A-Za-z_]\w*)\s*\(")
# What ptxas's resource lines do not show: dynamic shared memory (sized at launch) and warp barriers.
_SYNC_TEXT = re.compile(r"\bextern\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?__shared__\b|\b__syncwarp\b")


@dataclass(frozen=True)
class Declared:
    """A `__global__` function as the text declares it: name, parameter count and where."""

    name: str
    params: int
    file: Path
    line: int


def reachable_text(source: Path, search: Sequence[Path]) -> list[tuple[Path, str]]:
    """(file, text without comments) of `source` and every file its quoted includes reach, looked up
    beside the including file, then in `search`."""
    seen: dict[Path, str] = {}
    todo = [source]
    while todo:
        current = todo.pop()
        if current in seen or not current.is_file():
            continue
        text = current.read_text(encoding="utf-8", errors="replace")
        seen[current] = _COMMENT.sub(lambda m: "\n" * m.group().count("\n"), text)
        for name in _QUOTED_INCLUDE.findall(seen[current]):
            todo += [d / name for d in (current.parent, *search) if (d / name).is_file()][:1]
    return list(seen.items())


def declared_kernels(source: Path, search: Sequence[Path] = ()) -> list[Declared]:
    """Every `__global__` function the text of `source` and its quoted includes declares."""
    out = []
    for path, text in reachable_text(source, search):
        clean = _ATTRIBUTE.sub(lambda m: " " * len(m.group()), text)
        for m in _GLOBAL.finditer(clean):
            count = _param_count(clean, m.end() - 1)
            if count is not None:
                out.append(Declared(m.group(2), count, path, clean.count("\n", 0, m.start()) + 1))
    return out


def mentions(source: Path, search: Sequence[Path], identifier: str) -> bool:
    """True where `identifier` appears as a word anywhere in the reachable text (a kernel a macro makes)."""
    word = re.compile(rf"\b{re.escape(identifier)}\b")
    return any(word.search(text) for _path, text in reachable_text(source, search))


def _param_count(text: str, open_at: int) -> int | None:
    """Parameters of the list whose '(' is at `open_at`: top-level commas + 1 (0 for `()` or `(void)`);
    None where the list does not close."""
    depth, commas, start = 0, 0, open_at + 1
    for i in range(open_at, len(text)):
        ch = text[i]
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
            if depth == 0 and ch == ")":
                inner = text[start:i].strip()
                return 0 if inner in ("", "void") else commas + 1
        elif ch == "," and depth == 1:
            commas += 1
    return None


@dataclass(frozen=True)
class SyncText:
    """Where a source's text declares dynamic shared memory or calls __syncwarp: in which kernels' bodies
    (by name), and whether anywhere outside every kernel body (a helper any kernel may call)."""

    kernels: frozenset[str]
    outside: bool


def sync_text(source: Path, search: Sequence[Path] = ()) -> SyncText:
    """The kernels of `source` (and its quoted includes) whose body declares `extern __shared__` or calls
    __syncwarp, and whether a helper outside every kernel body does."""
    inside: set[str] = set()
    outside = False
    for _path, text in reachable_text(source, search):
        clean = _ATTRIBUTE.sub(lambda m: " " * len(m.group()), text)
        spans = []
        for m in _GLOBAL.finditer(clean):
            span = _body(clean, m.end() - 1)
            if span is not None:
                spans.append(span)
                if _SYNC_TEXT.search(clean, *span):
                    inside.add(m.group(2))
        outside = outside or any(not any(a <= hit.start() < b for a, b in spans) for hit in _SYNC_TEXT.finditer(clean))
    return SyncText(frozenset(inside), outside)


def _body(text: str, open_at: int) -> tuple[int, int] | None:
    """(start, end) of the braces of the function whose parameter list opens at `open_at`; None for a
    declaration without a body."""
    brace = text.find("{", open_at)
    if brace < 0 or ";" in text[open_at:brace]:
        return None
    depth = 0
    for i in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return brace, i + 1
    return None
