"""NVRTC through ctypes: compile-only builds need the NVRTC library, not CuPy of one CUDA major.

The library is looked up in pip's NVIDIA wheels first (what `.[dev]`, `.[cuda13]` and `.[cuda12]` install),
then a CUDA toolkit ($CUDA_PATH, $CUDA_HOME, /usr/local/cuda), then the loader's search path. Only the few
entry points the build uses are bound; every failure is a typed error with NVRTC's own message.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from pathlib import Path
from typing import Sequence

from strata_bench.errors import InputError

_SONAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")


class NvrtcUnavailable(InputError):
    """No loadable NVRTC library on this host."""


class NvrtcError(Exception):
    """NVRTC refused a program; `log` holds the compiler's log (file(line): error ...)."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


def _candidates() -> list[str]:
    paths: list[str] = []
    try:
        import nvidia  # namespace package of pip's CUDA wheels (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib)

        for base in getattr(nvidia, "__path__", []):
            for lib in sorted(Path(base).glob("*/lib")):
                paths += [str(lib / name) for name in _SONAMES if (lib / name).exists()]
    except ImportError:
        pass
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            for sub in ("lib64", "lib"):
                paths += [str(Path(root, sub, name)) for name in _SONAMES if Path(root, sub, name).exists()]
    found = ctypes.util.find_library("nvrtc")
    return list(dict.fromkeys(paths + ([found] if found else [])))


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The loaded NVRTC library (cached); NvrtcUnavailable when none loads."""
    tried = []
    for path in _candidates():
        try:
            _preload_builtins(Path(path).parent)
            lib = ctypes.CDLL(path)
        except OSError as exc:
            tried.append(f"{path}: {exc}")
            continue
        _declare(lib)
        return lib
    detail = "; ".join(tried) or "none found in pip's nvidia wheels, $CUDA_PATH or /usr/local/cuda"
    raise NvrtcUnavailable(f"NVRTC is not loadable ({detail}); install '.[dev]', '.[cuda13]' or '.[cuda12]'")


def _preload_builtins(folder: Path) -> None:
    """Load the libnvrtc-builtins beside libnvrtc first: NVRTC dlopens it by soname at compile time, and the
    13.0 wheel's libnvrtc has no RPATH $ORIGIN (13.5's has), so without this a pip-only 13.0 install fails
    every compile with 'failed to open libnvrtc-builtins.so.13.0'. An already loaded soname satisfies that
    dlopen."""
    for builtins in sorted(folder.glob("libnvrtc-builtins.so.*")):
        if ".alt." not in builtins.name:
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)


def _declare(lib: ctypes.CDLL) -> None:
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]


def _check(status: int, what: str, log: str = "") -> None:
    if status != 0:
        text = library().nvrtcGetErrorString(status).decode(errors="replace")
        raise NvrtcError(f"{what}: {text}", log)


def version() -> tuple[int, int]:
    """(major, minor) of the loaded NVRTC."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


@functools.lru_cache(maxsize=1)
def supported_archs() -> tuple[int, ...]:
    """The architectures this NVRTC can compile for, e.g. (75, 80, 86, ..., 120)."""
    lib, count = library(), ctypes.c_int()
    _check(lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * count.value)()
    _check(lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    return tuple(archs)


def compile_program(source: str, name: str, name_expressions: Sequence[str],
                    options: Sequence[str]) -> tuple[bytes, dict[str, str], str]:
    """Compile one translation unit: (cubin, {name expression: lowered symbol}, log).

    NvrtcError carries the log when the compile fails."""
    lib = library()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            _check(lib.nvrtcAddNameExpression(prog, expr.encode()), f"nvrtcAddNameExpression({expr})")
        argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        status = lib.nvrtcCompileProgram(prog, len(options), argv)
        log = _log(prog)
        _check(status, "nvrtcCompileProgram", log)
        lowered = {}
        for expr in name_expressions:
            symbol = ctypes.c_char_p()
            _check(lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(symbol)), "nvrtcGetLoweredName")
            lowered[expr] = symbol.value.decode()
        size = ctypes.c_size_t()
        _check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin.raw, lowered, log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _log(prog: ctypes.c_void_p) -> str:
    lib, size = library(), ctypes.c_size_t()
    if lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)) != 0 or size.value <= 1:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, buf)
    return buf.value.decode(errors="replace")
