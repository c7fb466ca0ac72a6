"""The persisting-L2 window reset before timing: a kernel (or an earlier library call) that set an access
policy window keeps lines resident across launches, so a "cold" rotation could still hit. CuPy exposes no
binding for cuCtxResetPersistingL2Cache, so the driver's function is called through ctypes on the current
context; where it cannot be (no libcuda, an old driver, no context) the reason is recorded instead.
"""
from __future__ import annotations

import ctypes
import ctypes.util

_DRIVER: dict[str, object] = {}


def _libcuda():
    if "lib" not in _DRIVER:
        try:
            _DRIVER["lib"] = ctypes.CDLL("libcuda.so.1")
        except OSError:
            name = ctypes.util.find_library("cuda")
            _DRIVER["lib"] = ctypes.CDLL(name) if name else None
    return _DRIVER["lib"]


def reset_persisting_l2() -> str:
    """"reset" when the current context's persisting L2 lines were reset, else why not."""
    try:
        lib = _libcuda()
    except OSError as exc:
        return f"not reset: libcuda not loadable ({exc})"
    if lib is None:
        return "not reset: no libcuda"
    fn = getattr(lib, "cuCtxResetPersistingL2Cache", None)
    if fn is None:
        return "not reset: driver has no cuCtxResetPersistingL2Cache"
    fn.restype = ctypes.c_int
    code = fn()
    return "reset" if code == 0 else f"not reset: CUresult {code}"
