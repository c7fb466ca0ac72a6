"""Devices: GPU detection in one place (every GPU path asks `probe()` or `require_gpu()`), `--device`
selection, and a device's name."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from strata_bench.errors import NoGpu


@dataclass(frozen=True)
class GpuProbe:
    """Whether this process can use a CUDA GPU, how many there are, and why not."""

    usable: bool
    count: int
    reason: str  # why not usable; "" when usable


@functools.lru_cache(maxsize=1)
def probe() -> GpuProbe:
    """Decide once per process whether a CUDA GPU is usable (ImportError, CUDARuntimeError, 0 devices)."""
    try:
        import cupy  # noqa: F401  (imported here so CPU commands never need it)
        from cupy_backends.cuda.api import runtime
    except ImportError as exc:
        return GpuProbe(False, 0, f"cupy not importable ({exc.name or exc})")
    try:
        count = runtime.getDeviceCount()
    except runtime.CUDARuntimeError as exc:
        return GpuProbe(False, 0, _runtime_error_name(exc))
    if count == 0:
        return GpuProbe(False, 0, "no CUDA device")
    return GpuProbe(True, count, "")


def _runtime_error_name(exc: Exception) -> str:
    # CUDARuntimeError's text starts with the enum name, e.g. "cudaErrorNoDevice: no CUDA-capable device".
    return str(exc).split(":", 1)[0].strip() or type(exc).__name__


def require_gpu() -> int:
    """Return the device count or raise NoGpu with the one-line reason."""
    status = probe()
    if not status.usable:
        raise NoGpu(f"skipped: no usable CUDA GPU ({status.reason})")
    return status.count


def select_devices(spec: str) -> list[int]:
    """Parse `--device N|all` against the devices present."""
    count = require_gpu()
    if spec == "all":
        return list(range(count))
    from strata_bench.errors import InputError

    try:
        index = int(spec)
    except ValueError:
        raise InputError(f"--device must be an index or 'all', got {spec!r}") from None
    if not 0 <= index < count:
        raise InputError(f"--device {index} out of range: {count} device(s) present")
    return [index]


def device_name(device: int) -> str:
    """The CUDA device's product name (e.g. 'NVIDIA H200'), as results/<device>/ is named after it."""
    from cupy_backends.cuda.api import runtime

    name = runtime.getDeviceProperties(device)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def local_archs() -> list[str]:
    """The architectures of this host's GPUs; raises NoGpu (exit 77) when there is none."""
    from strata_bench.kernels.build import device_arch

    return list(dict.fromkeys(device_arch(i) for i in range(require_gpu())))
