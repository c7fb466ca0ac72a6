"""NVML, the one place that talks to it (nvidia-ml-py, optional): initialised once per process, with the
reason kept when it cannot be; a device's clocks, power limit and temperature; the PCI bus id that finds
a CUDA device's NVML handle. Provenance (results/) and the clock readers (timing/) both read through here.
"""
from __future__ import annotations

from typing import Any, Callable

NVML_STATE: dict[str, Any] = {}  # "module": pynvml once initialised, or "error": why it is not usable


class Unavailable(RuntimeError):
    """A part of the environment that cannot be read here; its text is the reason as is."""


def reason(exc: BaseException) -> str:
    """One line for an exception: an Unavailable's text as is, else 'Type: first line'."""
    if isinstance(exc, Unavailable):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def fill(out: dict[str, Any], key: str, read: Callable[[], Any], none_reason: str = "not reported") -> None:
    """out[key] = read(), or None with out['reason'][key] saying why."""
    try:
        value = read()
    except Exception as exc:  # noqa: BLE001 - a reading must never stop a run; the reason is kept
        out["reason"][key] = reason(exc)
        return
    out[key] = value
    if value is None:
        out["reason"][key] = none_reason


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def pci_bus_id(props: dict[str, Any]) -> str | None:
    """NVML's bus id form of a CUDA device's properties, or None where they lack it."""
    try:
        return f"{int(props['pciDomainID']):08X}:{int(props['pciBusID']):02X}:{int(props['pciDeviceID']):02X}.0"
    except (KeyError, TypeError, ValueError):
        return None


def nvml() -> Any:
    """pynvml, initialised once per process; raises Unavailable with the reason when NVML is not usable."""
    if "error" in NVML_STATE:
        raise Unavailable(NVML_STATE["error"])
    if "module" not in NVML_STATE:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - ImportError, library not found, driver not loaded
            NVML_STATE["error"] = f"NVML not usable ({reason(exc)})"
            raise Unavailable(NVML_STATE["error"]) from None
        NVML_STATE["module"] = pynvml
    return NVML_STATE["module"]


def nvml_device_info(bus_id: str | None, index: int) -> dict[str, Any]:
    """Clocks (MHz), power limit (W) and temperature (C) of one device; None with reasons when unreadable.

    The handle is found by PCI bus id because NVML numbers devices without CUDA_VISIBLE_DEVICES."""
    out: dict[str, Any] = {k: None for k in ("sm_clock_mhz", "memory_clock_mhz", "max_sm_clock_mhz",
                                             "max_memory_clock_mhz", "power_limit_w", "temperature_c")}
    out["reason"] = {}
    try:
        nv = nvml()
        handle = (nv.nvmlDeviceGetHandleByPciBusId(bus_id.encode()) if bus_id
                  else nv.nvmlDeviceGetHandleByIndex(index))
    except Exception as exc:  # noqa: BLE001
        out["reason"] = {"all": reason(exc)}
        return out
    readers = {
        "sm_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM),
        "memory_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM),
        "max_memory_clock_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_MEM),
        "power_limit_w": lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        "temperature_c": lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU),
    }
    for key, read in readers.items():
        fill(out, key, read)
    return out
