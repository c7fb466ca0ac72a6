"""Whether two results files were measured under the same conditions: device, driver, clocks policy
and kernel sources, read from each file's provenance (strata_bench.results.provenance).

A time measured on another card, driver or clock cap, or of other kernel sources, is not the same
experiment: `compare` refuses such a pair unless told otherwise (ProvenanceMismatch, exit 2).

Sources: where both files record source closures (results/closures.py), the closures of the families
both contain are compared, each family that differs named with its files, so an edit to a kernel
neither measured does not stand between them. Otherwise (a file written before closures, or a command
A/B) the kernels_src hash, over every file, must agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from strata_bench.errors import InputError
from strata_bench.results import closures


class ProvenanceMismatch(InputError):
    """OLD and NEW were measured under different conditions (exit 2 unless --allow-different)."""


@dataclass(frozen=True)
class Difference:
    """One condition that differs, with its value in each file."""

    what: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.what} (OLD {self.old}, NEW {self.new})"


def _devices(prov: Mapping[str, Any]) -> str | None:
    # The distinct kinds of card, not their count or bus ids: a run on GPU 1 compares with one on GPU 0.
    names = sorted({f"{d.get('name')} ({d.get('arch')})" for d in prov.get("devices") or [] if d.get("name")})
    return ", ".join(names) or None


def _driver(prov: Mapping[str, Any]) -> str | None:
    cuda = prov.get("cuda") or {}
    value = cuda.get("nvml_driver") or cuda.get("driver")
    return None if value is None else str(value)


def _clocks(prov: Mapping[str, Any]) -> str | None:
    """The caps a card runs under: max SM and memory clock and the power limit (NVML), per kind of card,
    and a recorded clocks policy where the file has one."""
    parts = set()
    for d in prov.get("devices") or []:
        nvml = d.get("nvml") or {}
        caps = (nvml.get("max_sm_clock_mhz"), nvml.get("max_memory_clock_mhz"), nvml.get("power_limit_w"))
        if any(c is not None for c in caps):
            parts.add("max SM {} MHz, max memory {} MHz, power limit {} W".format(*caps))
    if prov.get("clocks_policy") is not None:
        parts.add(f"policy {prov['clocks_policy']}")
    return "; ".join(sorted(parts)) or None


def _kernels_src(prov: Mapping[str, Any]) -> str | None:
    value = prov.get("kernels_src_hash")
    return None if not value else str(value)


CONDITIONS: tuple[tuple[str, Callable[[Mapping[str, Any]], str | None]], ...] = (
    ("device", _devices), ("driver", _driver), ("clocks policy", _clocks), ("kernels_src hash", _kernels_src))


def _short(what: str, old: str, new: str) -> tuple[str, str]:
    """Hashes shown as 12 hex digits, unless those agree."""
    if what == "kernels_src hash" and old[:12] != new[:12]:
        return old[:12], new[:12]
    return old, new


def check_conditions(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
                     ) -> tuple[tuple[Difference, ...], tuple[str, ...]]:
    """(the conditions that differ, the conditions not checked: "driver (not in OLD)")."""
    old, new = old or {}, new or {}
    differences, unchecked = [], []
    for what, read in CONDITIONS:
        if what == "kernels_src hash" and "sources" in old and "sources" in new:
            # Both record closures: they judge the sources, family by family, instead of the whole folder.
            found, skipped = _source_differences(old["sources"], new["sources"])
            differences += found
            unchecked += skipped
            continue
        a, b = read(old), read(new)
        if a is None or b is None:
            where = "either file" if a is None and b is None else ("OLD" if a is None else "NEW")
            unchecked.append(f"{what} (not in {where})")
        elif a != b:
            differences.append(Difference(what, *_short(what, a, b)))
    return tuple(differences), tuple(unchecked)


def _source_differences(old: Any, new: Any) -> tuple[list[Difference], list[str]]:
    """Each family both files recorded whose closure differs: "mmvq sources: kernels_src/mmvq/mmvq.cu
    changed" with both closures' hashes."""
    try:
        a, b = closures.parse(old), closures.parse(new)
    except InputError as exc:
        raise InputError(f"compare: provenance {exc}") from None
    common = [key for key in a if key in b]
    if not common:
        return [], ["sources (no family in both files)"]
    return [Difference(f"{key} sources: {', '.join(closures.changes(a[key], b[key]))}", a[key].hash[:12],
                       b[key].hash[:12]) for key in common if a[key].hash != b[key].hash], []


def refusal(differences: tuple[Difference, ...]) -> str:
    """The one-line message of a refused comparison."""
    return (f"compare: OLD and NEW were measured under different conditions: "
            f"{'; '.join(str(d) for d in differences)}; pass --allow-different to compare them anyway")
