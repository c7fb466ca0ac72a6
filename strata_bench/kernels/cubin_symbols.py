"""Find a kernel of a cubin by the name a variant declares ("mmvq_row8<siq::fmt_iq2_xxs>"): every entry
symbol is demangled (c++filt; the toolkit's cu++filt where it is installed) to its name without return
type and parameter list, and compared with the declared one, spaces normalised.

nvcc cannot lower a name expression as NVRTC does (nvrtcGetLoweredName), so the symbol table is the
one place the mangled name can come from. A declared name matching no kernel, or several, is one line
naming the candidates.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
from typing import Iterable, Mapping

from strata_bench.errors import InputError

DEMANGLERS = ("cu++filt", "c++filt", "llvm-cxxfilt")
_SHOWN = 8  # candidates named in a message at most


class KernelNotFound(InputError):
    """A declared kernel name that matches no kernel of the cubin, or several."""


@functools.lru_cache(maxsize=1)
def demangler() -> str | None:
    """The first demangler on PATH (cu++filt, c++filt, llvm-cxxfilt); None where there is none."""
    return next((found for name in DEMANGLERS if (found := shutil.which(name))), None)


def demangle(symbols: Iterable[str]) -> dict[str, str]:
    """symbol -> demangled text (the symbol itself where no demangler is installed: then a declared
    name can only match a symbol as it is mangled)."""
    names = list(dict.fromkeys(symbols))
    tool = demangler()
    if tool is None or not names:
        return {n: n for n in names}
    done = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    return dict(zip(names, lines)) if len(lines) == len(names) else {n: n for n in names}


def normalize(name: str) -> str:
    """Spaces dropped except between two word characters ("unsigned int"), so "k<a, 1>" == "k<a,1>"; and
    the demanglers' differences made one: the toolkit's cu++filt writes template values with their type
    ("(int)1", "(bool)0") where c++filt writes "1" and "false", nvcc's internal namespace of a static
    function (_INTERNAL_<hash>_10_convert_cu_<hash>::) is shown by one and not the other, and a function
    template argument is "&(void f<T>(char const*))" to c++filt, "&f<T>" as declared; a const pointee is
    "const float *" to cu++filt and "float const*" to c++filt (the H100's cu++filt did not match
    binbcast's k_bin_bcast<&op_add, float, float, float, float const*>)."""
    text = re.sub(r"\s+", " ", name.strip())
    text = re.sub(r"\bconst ([\w:]+) ?(?=[*&])", r"\1 const", text)
    text = re.sub(r"(?<=\W) | (?=\W)", "", text)
    text = re.sub(r"_INTERNAL_\w*?::", "", text)
    text = re.sub(r"\(bool\)0\b", "false", re.sub(r"\(bool\)1\b", "true", text))
    # A function as a template argument: c++filt spells it with its type, &(void f<T>(char const*)), a
    # declared name and cu++filt as &f<T>.
    text = re.sub(r"&\((?:[\w:]+ )?([\w:]+(?:<[^()]*>)?)\([^()]*\)\)", r"&\1", text)
    return re.sub(r"\((?:int|unsigned int|unsigned|long|unsigned long|long long)\)(-?\d+)", r"\1", text)


def declared_name(demangled: str) -> str:
    """A demangled function without its return type and parameter list:
    'void k<(t)16, 1>(void const*, int)' -> 'k<(t)16, 1>'."""
    text = demangled.strip()
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(text[i], 0)
            if depth == 0:
                text = text[:i]
                break
    return text.removeprefix("void ").strip()


def base_name(name: str) -> str:
    """The name before its template arguments: 'ns::k<a, 1>' -> 'ns::k'."""
    return name.split("<", 1)[0].strip()


def find_kernel(declared: str, symbols: Iterable[str], where: str,
                demangled: Mapping[str, str] | None = None) -> str:
    """The one symbol whose declared name is `declared` (the mangled symbol itself also matches); a
    template name without arguments matches its one instance. KernelNotFound names the candidates."""
    symbols = list(symbols)
    demangled = demangle(symbols) if demangled is None else demangled
    names = {s: declared_name(demangled.get(s, s)) for s in symbols}
    want = normalize(declared)
    exact = [s for s in symbols if s == declared or normalize(names[s]) == want]
    if len(exact) == 1:
        return exact[0]
    if not exact and "<" not in declared:
        exact = [s for s in symbols if normalize(base_name(names[s])) == want]
        if len(exact) == 1:
            return exact[0]
    if exact:
        raise KernelNotFound(f"{where}: kernel {declared!r} matches {len(exact)} kernels: "
                             f"{_listed(sorted(names[s] for s in exact))}")
    raise KernelNotFound(f"{where}: kernel {declared!r} matches no kernel of the cubin "
                         f"({_candidates(declared, names.values())}){_no_demangler_note()}")


def _candidates(declared: str, names: Iterable[str]) -> str:
    names = sorted(set(names))
    if not names:
        return "it has no kernels"
    same = [n for n in names if normalize(base_name(n)) == normalize(base_name(declared))]
    return f"kernels: {_listed(same or names)}"


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    more = f", ... ({len(names) - _SHOWN} more)" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def _no_demangler_note() -> str:
    if demangler() is not None:
        return ""
    return f"; no demangler found ({', '.join(DEMANGLERS)}): names are compared as mangled symbols"
