"""`strata-bench env`: the provenance of this host, rendered for a person (rich tables) or a script (JSON).

Everything shown comes from `provenance.collect`, so what `env` prints is exactly what results record.
"""
from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from strata_bench.results import provenance

GiB = 1 << 30
MiB = 1 << 20


def collect() -> dict[str, Any]:
    """Provenance of every visible device (none on a GPU-less host: `devices_reason` says why)."""
    return provenance.collect(None)


def _or_dash(value: Any, unit: str = "") -> str:
    return "-" if value is None else f"{value}{unit}"


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / MiB:g} MiB"


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GiB:.1f} GiB"


def device_rows(prov: dict[str, Any]) -> list[dict[str, str]]:
    """One display row per device: static properties from CUDA, live ones from NVML."""
    rows = []
    for dev in prov["devices"]:
        if dev.get("name") is None:  # a device CUDA could not describe: its index and why
            rows.append({"#": str(dev["index"]), "name": f"- ({dev.get('reason', 'unknown')})"})
            continue
        nvml = dev.get("nvml") or {}
        khz = dev.get("memory_clock_khz")
        rows.append({
            "#": str(dev["index"]),
            "name": dev["name"],
            "cc": dev["compute_capability"],
            "SMs": str(dev["sm_count"]),
            "L2": _mib(dev["l2_bytes"]),
            "mem clock": "-" if khz is None else f"{khz / 1000:g} MHz",
            "bus": _or_dash(dev.get("memory_bus_width_bits"), "-bit"),
            "memory": _gib(dev["total_memory_bytes"]),
            "SM clock (max)": _clock_pair(nvml.get("sm_clock_mhz"), nvml.get("max_sm_clock_mhz")),
            "mem clock NVML (max)": _clock_pair(nvml.get("memory_clock_mhz"), nvml.get("max_memory_clock_mhz")),
            "power limit": _or_dash(nvml.get("power_limit_w"), " W"),
            "temp": _or_dash(nvml.get("temperature_c"), " C"),
        })
    return rows


def _clock_pair(now: int | None, peak: int | None) -> str:
    if now is None and peak is None:
        return "-"
    return f"{_or_dash(now)} ({_or_dash(peak)}) MHz"


def version_rows(prov: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, version or the reason it is missing) for driver, CUDA, NVRTC and every package."""
    cuda = prov["cuda"]
    reasons = cuda.get("reason", {})

    def shown(key: str) -> str:
        value = cuda.get(key)
        return value if value is not None else f"- ({reasons.get(key, 'unknown')})"

    rows = [("NVIDIA driver (NVML)", shown("nvml_driver")), ("CUDA driver API", shown("driver")),
            ("CUDA runtime (CuPy)", shown("runtime")), ("NVRTC", shown("nvrtc"))]
    rows += [(name, version or "not installed") for name, version in prov["packages"].items()]
    rows += [("python", prov["python"]["version"]), ("kernels_src sha256", prov["kernels_src_hash"]),
             ("git", _git_text(prov["git"]))]
    rows += [(key, value) for key, value in prov["env"].items()]
    return rows


def _git_text(git: dict[str, Any]) -> str:
    if not git.get("commit"):
        return "- (not a git checkout)"
    return git["commit"][:12] + (" (dirty)" if git.get("dirty") else "")


def render_table(prov: dict[str, Any], console: Console) -> None:
    rows = device_rows(prov)
    if rows:
        table = Table(title=f"Devices ({len(rows)})")
        columns = max((list(row) for row in rows), key=len)  # an unreadable device's row has fewer keys
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(row.get(column, "-") for column in columns))
        console.print(table)
        for reason in sorted({(d.get("nvml") or {}).get("reason", {}).get("all") for d in prov["devices"]} - {None}):
            console.print(f"NVML clocks and power: {reason}")
    else:
        console.print(f"Devices: none usable ({prov['devices_reason']})")
    versions = Table(title="Software")
    versions.add_column("component")
    versions.add_column("version", overflow="fold")
    for name, text in version_rows(prov):
        versions.add_row(name, text)
    console.print(versions)


def render_json(prov: dict[str, Any]) -> str:
    return json.dumps(prov, indent=2, sort_keys=True, default=str)
