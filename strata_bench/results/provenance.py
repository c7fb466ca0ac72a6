"""Provenance: everything a result needs to be reproduced or questioned, collected in one call.

`collect()` never raises because a GPU, NVML or NVRTC is missing: each part that cannot be read becomes
None and a `reason` beside it says why, so a results file written on any host is still complete about
what it knows. It imports cupy and pynvml lazily and takes well under half a second.

Keys (schema 1): created_utc, command, host, python, packages, cuda, devices, devices_reason,
kernels_src_hash, compile_options, variant_builds, git, env, extra; and sources (results/closures.py: each
family's source closure) where the caller names the families the run compiles.
"""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import socket
import sys
from typing import Any, Callable

from strata_bench.gpu.nvml import Unavailable, nvml, nvml_device_info  # noqa: F401  (Unavailable: raised by readers here)
from strata_bench.gpu.nvml import fill as _fill, pci_bus_id as _pci_bus_id, reason as _reason, text as _text

PROVENANCE_SCHEMA = 1
PACKAGES = ("strata-bench", "click", "numpy", "cupy-cuda13x", "cupy-cuda12x", "gguf", "scipy", "rich",
            "pandas", "nvidia-cuda-nvrtc", "nvidia-ml-py")
ENV_PREFIX = "STRATA_"
MiB = 1 << 20


def command_line(argv: list[str]) -> list[str]:
    """sys.argv with paths inside the repository made relative to it, so results name no machine's folders."""
    from strata_bench.kernels.sources import REPO_ROOT

    root = str(REPO_ROOT) + "/"
    return [a[len(root):] if a.startswith(root) else a for a in argv]


def collect(device_ids: list[int] | None = None, extra: dict | None = None,
            archs: list[str] | None = None, families: dict[str, Any] | None = None) -> dict[str, Any]:
    """Provenance of a run on `device_ids` (None: every usable device).

    `archs` names the architectures whose compile options are recorded (default: those of the devices);
    `extra` is stored as is under "extra" (a command's own settings); `families` (name -> Family), the
    families whose kernels the run compiles, adds "sources", the closure of each, by which the result
    is later judged current. Without it (a command A/B, which may run anything) the result is judged by
    kernels_src_hash alone.
    """
    from strata_bench.kernels import sources
    from strata_bench.results.store import git_state

    devices, devices_reason = device_info(device_ids)
    archs = archs if archs is not None else sorted({d["arch"] for d in devices if d.get("arch")})
    prov = {
        "schema": PROVENANCE_SCHEMA,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command_line(sys.argv),
        "host": host_info(),
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation()},
        "packages": package_versions(),
        "cuda": cuda_versions(),
        "devices": devices,
        "devices_reason": devices_reason,
        "kernels_src_hash": sources.kernels_src_hash(),
        "compile_options": {arch: _guarded(lambda a=arch: _recorded_options(a)) for arch in archs},
        "variant_builds": {arch: _guarded(lambda a=arch: variant_builds(a, families or {})) for arch in archs},
        "git": git_state(sources.REPO_ROOT),
        "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIX)},
        "extra": dict(extra or {}),
    }
    if families is not None:
        from strata_bench.results.closures import family_records

        prov["sources"] = family_records(families)
    return prov


def host_info() -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "system": platform.system(), "release": platform.release(),
            "machine": platform.machine(), "cpu_count": os.cpu_count()}


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed distribution versions; None for a package that is not installed."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    # cupy is imported under one name whatever its wheel is called; record the wheel that is there.
    out["cupy"] = out.get("cupy-cuda13x") or out.get("cupy-cuda12x") or _module_version("cupy")
    if out.get("strata-bench") is None:  # a source checkout run without `pip install`
        from strata_bench import __version__

        out["strata-bench"] = f"{__version__} (source)"
    return out


def _module_version(module: str) -> str | None:
    try:
        return getattr(__import__(module), "__version__", None)
    except ImportError:
        return None


def _cuda_version_text(encoded: int) -> str | None:
    """CUDA's 1000*major + 10*minor encoding -> "13.0"; 0 (no driver) -> None."""
    if not encoded:
        return None
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def cuda_versions() -> dict[str, Any]:
    """CUDA runtime (linked into cupy), driver (what the driver supports), NVRTC, NVML driver string."""
    out: dict[str, Any] = {"runtime": None, "driver": None, "nvrtc": None, "nvml_driver": None, "reason": {}}
    try:
        from cupy_backends.cuda.api import runtime
    except ImportError as exc:
        out["reason"]["runtime"] = out["reason"]["driver"] = f"cupy not importable ({exc.name or exc})"
    else:
        _fill(out, "runtime", lambda: _cuda_version_text(runtime.runtimeGetVersion()))
        _fill(out, "driver", lambda: _cuda_version_text(runtime.driverGetVersion()), "no CUDA driver")
    _fill(out, "nvrtc", _nvrtc_version_text)
    _fill(out, "nvml_driver", lambda: _text(nvml().nvmlSystemGetDriverVersion()))
    return out


def _nvrtc_version_text() -> str:
    from strata_bench.kernels.build import nvrtc_version

    major, minor = nvrtc_version()
    return f"{major}.{minor}"


def _guarded(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as exc:  # noqa: BLE001
        return {"error": _reason(exc)}


def _recorded_options(arch: str) -> list[str]:
    from strata_bench.kernels.build import recorded_options

    return recorded_options(arch)


def variant_builds(arch: str, families: dict[str, Any]) -> list[dict[str, Any]]:
    """How every variant of `families` with a build of its own (TOML, a foreign engine's) is built for
    `arch`: its family and source, the compiler and its options (NVRTC), its exact command and version
    (nvcc) or its binary's sha256 (kernels/variant_build.py SourceBuild.record). Empty where none is."""
    from strata_bench.kernels.variant_build import builds_of

    records = [{"family": family, "source": source, **spec.record(arch)}
               for family, source, spec in builds_of(families)]
    return [inside_relative(r, os.getcwd().rstrip("/") + "/") for r in records]


def inside_relative(value: Any, cwd: str | None = None) -> Any:
    """`value` with every path under the working directory written relative to it (a variant's source, a
    ggml tree and their -I folders are held as absolute paths): results name no path of the host that ran."""
    cwd = cwd or os.getcwd().rstrip("/") + "/"
    if isinstance(value, str):
        return value.replace(cwd, "")
    if isinstance(value, list):
        return [inside_relative(v, cwd) for v in value]
    if isinstance(value, dict):
        return {k: inside_relative(v, cwd) for k, v in value.items()}
    return value


# ---------------------------------------------------------------- devices

def device_info(device_ids: list[int] | None) -> tuple[list[dict[str, Any]], str]:
    """(one dict per device, reason when there are none). Never raises for a missing GPU."""
    from strata_bench.gpu.devices import probe

    status = probe()
    if not status.usable:
        return [], status.reason
    ids = list(range(status.count)) if device_ids is None else list(device_ids)
    return [_guarded_device(i) for i in ids], ""


def _guarded_device(index: int) -> dict[str, Any]:
    """One device's entry; a device CUDA cannot describe keeps its index, with the reason, so the list
    still has an entry per device (a host where one of several GPUs has fallen off the bus)."""
    try:
        return _one_device(index)
    except Exception as exc:  # noqa: BLE001 - provenance must never stop a run; the reason is kept
        return {"index": index, "name": None, "reason": _reason(exc)}


def _one_device(index: int) -> dict[str, Any]:
    from cupy_backends.cuda.api import runtime

    props = runtime.getDeviceProperties(index)
    info = {
        "index": index,
        "name": _text(props["name"]),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "arch": f"sm_{props['major']}{props['minor']}",
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props["l2CacheSize"]),
        "memory_clock_khz": int(props.get("memoryClockRate", 0)) or None,
        "memory_bus_width_bits": int(props.get("memoryBusWidth", 0)) or None,
        "total_memory_bytes": int(props["totalGlobalMem"]),
        "pci_bus_id": _pci_bus_id(props),
    }
    info["nvml"] = nvml_device_info(info["pci_bus_id"], index)
    return info
