"""A ggml kernel's name as nvcc's symbol spells it: every template argument, the defaulted ones included.

A launch names its kernel as ggml's code does (`mul_mat_q<(ggml_type)8, 8, true>`), leaving out the
arguments with a default (mul_mat_q's fourth, `ggml_prec prec_src1 = GGML_PREC_Q8`). NVRTC lowers such a
name expression itself; nvcc's cubin is searched by demangled name (kernels/cubin_symbols.py), and a
demangled symbol spells every argument (`mul_mat_q<(ggml_type)8, (int)8, (bool)1, (ggml_prec)30>`). So
`complete` appends the defaults the tree's own declaration gives, an enumerator as `(enum)value`, which is
how the demangler writes it; the matcher already makes `(int)8` and `(bool)1` one with `8` and `true`.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

from strata_bench.ggml.tree import _uncommented

KERNEL_DIR = "src/ggml-cuda"
ENUM_DIRS = ("include", "src", KERNEL_DIR)  # where an enum a default names may be declared
_SUFFIX = re.compile(r"[uUlL]+$")


def complete(root: Path, source: Path, expr: str) -> str:
    """`expr` with the defaulted template arguments it leaves out appended, as the tree declares them
    (`source` first, then the kernel folder's headers); `expr` itself where it names every argument, is no
    template instance, or a default cannot be spelled (the matcher then says which kernels there are)."""
    parts = split_template(expr)
    if parts is None:
        return expr
    base, args = parts
    params = kernel_params(root, source, base.rsplit("::", 1)[-1])
    if params is None or len(args) >= len(params):
        return expr
    spelled = [spell_default(root, ctype, default) for ctype, default in params[len(args):]]
    if any(s is None for s in spelled):
        return expr
    return f"{base}<{', '.join([*args, *spelled])}>"


def split_template(expr: str) -> tuple[str, list[str]] | None:
    """'k<a, f<b, c>>' -> ('k', ['a', 'f<b, c>']); None for a name without template arguments."""
    text = expr.strip()
    if not text.endswith(">") or "<" not in text:
        return None
    base, inner = text.split("<", 1)
    return base.strip(), [a.strip() for a in top_level_split(inner[:-1])]


def top_level_split(text: str) -> list[str]:
    """`text` cut at the commas outside <>, () and [] (a template argument may hold a comma)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "<([") - (ch in ">)]")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]] if text.strip() else parts


@functools.lru_cache(maxsize=256)
def kernel_params(root: Path, source: Path, name: str) -> tuple[tuple[str, str | None], ...] | None:
    """(type, default or None) of each template parameter of the `__global__` kernel `name`, from its
    first template declaration in `source`, else in the kernel folder; None where none is found."""
    for path in [source, *sorted((root / KERNEL_DIR).glob("*.cuh"))]:
        found = _declared_params(_text(path), name)
        if found is not None:
            return found
    return None


def _declared_params(text: str, name: str) -> tuple[tuple[str, str | None], ...] | None:
    for kernel in re.finditer(rf"__global__\s+void\s+{re.escape(name)}\s*\(", text):
        head = text[:kernel.start()]
        found = _angle_body(head, head.rfind("template"))
        # Between the template's `>` and the kernel only qualifiers and __launch_bounds__(...): a `;` or a
        # brace means the template belongs to something else (the kernel itself is no template).
        if found is not None and not re.search(r"[;{}]", head[found[1]:]):
            return tuple(_param(p) for p in top_level_split(found[0]))
    return None


def _angle_body(text: str, start: int) -> tuple[str, int] | None:
    """What the <...> after `template` at `start` holds, and where it ends; None where there is no
    `template` (start < 0) or its <...> does not close."""
    open_at = text.find("<", start) if start >= 0 else -1
    depth = 0
    for i in range(open_at, len(text)) if open_at >= 0 else ():
        depth += (text[i] == "<") - (text[i] == ">")
        if depth == 0:
            return text[open_at + 1:i], i + 1
    return None


def _param(text: str) -> tuple[str, str | None]:
    """'ggml_prec prec = GGML_PREC_Q8' -> ('ggml_prec', 'GGML_PREC_Q8'); 'int J' -> ('int', None)."""
    decl, _, default = text.partition("=")
    words = decl.split()
    ctype = " ".join(words[:-1]) if len(words) > 1 else decl.strip()
    return ctype, (default.strip() or None)


def spell_default(root: Path, ctype: str, default: str | None) -> str | None:
    """A default as the demangled symbol writes it: a number or bool as is (the matcher drops the casts
    of int and bool), an enumerator as `(enum)value`; None where it cannot be worked out."""
    if default is None:
        return None
    if default in ("true", "false") or re.fullmatch(r"-?\d+[uUlL]*", default):
        return _SUFFIX.sub("", default)
    if ctype in ("typename", "class"):
        return default  # a type, written as declared
    value = enum_values(root, ctype).get(default)
    return None if value is None else f"({ctype}){value}"


@functools.lru_cache(maxsize=64)
def enum_values(root: Path, enum: str) -> dict[str, int]:
    """enumerator -> value of `enum`, from its first declaration in the tree's headers; {} where none."""
    pattern = re.compile(rf"\benum\s+(?:class\s+)?{re.escape(enum)}\s*(?::\s*[\w ]+)?\{{([^}}]*)\}}")
    for folder in ENUM_DIRS:
        for path in sorted((root / folder).glob("*.h*")):
            found = pattern.search(_text(path))
            if found:
                return _enumerators(found.group(1))
    return {}


def _enumerators(body: str) -> dict[str, int]:
    """`A = 0, B, C = A` -> {A: 0, B: 1, C: 0}: C's rule, each one more than the last unless given."""
    values: dict[str, int] = {}
    following = 0
    for entry in (e.strip() for e in body.split(",")):
        name, _, given = (s.strip() for s in entry.partition("="))
        if not name:
            continue
        if given:
            number = values.get(given)
            try:
                following = number if number is not None else int(_SUFFIX.sub("", given), 0)
            except ValueError:  # an expression: this and the later values are not known here
                return values
        values[name] = following
        following += 1
    return values


def _text(path: Path) -> str:
    try:
        return _uncommented(path.read_text(errors="replace"))
    except OSError:
        return ""
