"""Clocks and throttling around each measurement: SM and memory clock, temperature, power, NVML's
clocks-event reasons and its violation counters (nanoseconds spent held back by power, thermal, ...).

A reading is taken before and after each bench variant's trials and around each kernel A/B run; the
readings of one case (or one run) are summarised: the clocks' spread, the hottest and most power-hungry
reading, the throttle reasons seen and the counters that grew. "Throttled" means a reason that holds the
clock down (power cap, thermal, hardware slowdown, power brake) was set, or such a counter grew.
NVML is optional (nvidia-ml-py): without it every summary says why it has no clocks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

# NVML clocks-event reason bits (nvml.h: nvmlClocksEventReason*) that mean the clock was held down.
THROTTLE_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                    0x80: "hw_power_brake"}
# Violation counters (nvmlDeviceGetViolationStatus) whose growth means the same.
COUNTERS = ("POWER", "THERMAL", "BOARD_LIMIT", "RELIABILITY")


@dataclass(frozen=True)
class ClockSample:
    """One NVML reading; a field is None when this driver does not report it."""

    sm_mhz: int | None = None
    mem_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    reasons: int | None = None  # clocks-event reason bits
    counters_ns: Mapping[str, int] = field(default_factory=dict)  # violation time so far, per policy


@dataclass(frozen=True)
class ClockSummary:
    """The readings of one case or one run."""

    samples: int
    sm_mhz: tuple[int, int] | None = None  # (min, max)
    mem_mhz: tuple[int, int] | None = None
    max_temperature_c: int | None = None
    max_power_w: float | None = None
    reasons: tuple[str, ...] = ()  # throttle reasons seen in any reading
    counters_ns: Mapping[str, int] = field(default_factory=dict)  # growth between first and last reading
    unavailable: str = ""  # why there are no readings

    @property
    def throttled(self) -> bool:
        return bool(self.reasons) or any(v > 0 for v in self.counters_ns.values())

    @property
    def sm_spread(self) -> float:
        """(max - min) / max of the SM clock over the readings; nan without readings."""
        if not self.sm_mhz or not self.sm_mhz[1]:
            return math.nan
        return (self.sm_mhz[1] - self.sm_mhz[0]) / self.sm_mhz[1]

    def throttle_text(self) -> str:
        """'' when not throttled, else e.g. 'throttled: sw_power_cap, POWER +1.2 ms'."""
        if not self.throttled:
            return ""
        grown = [f"{k} +{v / 1e6:.1f} ms" for k, v in self.counters_ns.items() if v > 0]
        return "throttled: " + ", ".join(list(self.reasons) + grown)

    def text(self) -> str:
        """Short cell text: '1980 MHz', '1755-1980 MHz', or 'no clocks'."""
        if not self.sm_mhz:
            return "no clocks"
        lo, hi = self.sm_mhz
        return f"{hi} MHz" if lo == hi else f"{lo}-{hi} MHz"

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "sm_mhz": list(self.sm_mhz) if self.sm_mhz else None,
                "mem_mhz": list(self.mem_mhz) if self.mem_mhz else None,
                "max_temperature_c": self.max_temperature_c, "max_power_w": self.max_power_w,
                "reasons": list(self.reasons), "counters_ns": dict(self.counters_ns),
                "throttled": self.throttled, "sm_spread": None if math.isnan(self.sm_spread) else self.sm_spread,
                **({"unavailable": self.unavailable} if self.unavailable else {})}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> "ClockSummary":
        def pair(v): return tuple(v) if v else None
        return cls(int(body.get("samples", 0)), pair(body.get("sm_mhz")), pair(body.get("mem_mhz")),
                   body.get("max_temperature_c"), body.get("max_power_w"), tuple(body.get("reasons") or ()),
                   dict(body.get("counters_ns") or {}), body.get("unavailable", ""))


def reason_names(bits: int | None) -> tuple[str, ...]:
    """The throttle reasons among NVML's clocks-event bits (idle, application clocks, sync boost are not)."""
    if not bits:
        return ()
    return tuple(name for bit, name in THROTTLE_REASONS.items() if bits & bit)


def _span(values: list[int]) -> tuple[int, int] | None:
    return (min(values), max(values)) if values else None


def summarize(samples: Iterable[ClockSample], unavailable: str = "") -> ClockSummary:
    """One summary of readings taken in order (counter growth is last minus first)."""
    samples = list(samples)
    if not samples:
        return ClockSummary(0, unavailable=unavailable or "no readings")
    sm = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    mem = [s.mem_mhz for s in samples if s.mem_mhz is not None]
    temps = [s.temperature_c for s in samples if s.temperature_c is not None]
    power = [s.power_w for s in samples if s.power_w is not None]
    bits = 0
    for s in samples:
        bits |= s.reasons or 0
    first, last = samples[0].counters_ns, samples[-1].counters_ns
    grown = {k: int(last[k] - first[k]) for k in last if k in first}
    return ClockSummary(len(samples), _span(sm), _span(mem), max(temps) if temps else None,
                        max(power) if power else None, reason_names(bits), grown)


class ClockReader:
    """Reads one device's clocks through NVML; `read()` is None when NVML is not usable (`unavailable`)."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.unavailable = ""
        self._nv = self._handle = None
        try:
            self._open()
        except Exception as exc:  # noqa: BLE001 - no pynvml, no driver, a handle NVML cannot find
            from strata_bench.gpu.nvml import reason as _reason

            self.unavailable = _reason(exc)

    def _open(self) -> None:
        from strata_bench.gpu import nvml

        nv = nvml.nvml()
        pci = None
        try:
            import cupy

            pci = nvml.pci_bus_id(cupy.cuda.runtime.getDeviceProperties(self.device))
        except Exception:  # noqa: BLE001 - no device properties: NVML's own numbering
            pass
        self._handle = nv.nvmlDeviceGetHandleByPciBusId(pci.encode()) if pci else nv.nvmlDeviceGetHandleByIndex(
            self.device)
        self._nv = nv

    def read(self) -> ClockSample | None:
        if self._nv is None:
            return None
        nv, h = self._nv, self._handle
        reasons_fn = (getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
                      or getattr(nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        counters = {}
        for name in COUNTERS:
            policy = getattr(nv, f"NVML_PERF_POLICY_{name}", None)
            value = _try(lambda p=policy: nv.nvmlDeviceGetViolationStatus(h, p)) if policy is not None else None
            if value is not None:
                counters[name] = int(getattr(value, "violationTime", value))
        power_mw = _try(lambda: nv.nvmlDeviceGetPowerUsage(h))
        return ClockSample(_try(lambda: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))),
                           _try(lambda: int(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))),
                           _try(lambda: int(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))),
                           None if power_mw is None else power_mw / 1000.0,
                           _try(lambda: int(reasons_fn(h))) if reasons_fn else None, counters)

    def summary(self, samples: Iterable[ClockSample | None]) -> ClockSummary:
        return summarize([s for s in samples if s is not None], self.unavailable)


def _try(read):
    try:
        return read()
    except Exception:  # noqa: BLE001 - a reading this driver does not support stays None
        return None
