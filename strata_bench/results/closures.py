"""The source closures a result was measured on, recorded in its provenance and judged again later.

A result records, for each family its cases compiled, the include closure of the family's sources
(kernels/closure.py): every file those compiles read, with its sha256, and the translation units with
their include path, so the closure can be scanned again from the same starting points. A result is then
stale only where a file its own compiles read has changed: an edit to another family's kernel, or to an
experiment's kernel no built-in family compiles, leaves it current (kernels_src_hash, which covers every
file, staled every result at once).

    provenance["sources"] = {
        "mmvq": {"hash": "<sha256 of the files>",
                 "files": {"kernels_src/mmvq/mmvq.cu": "<sha256>", ...},
                 "units": [{"source": "kernels_src/mmvq/mmvq.cu", "include": ["kernels_src", "<cuda>"]}]},
        "mmvq:examples/toml_variant/mmvq_row8.cu": {...},   # a source a TOML variant added to mmvq
    }

Files are named portably: `kernels_src/...` inside the kernels folder (wherever STRATA_KERNELS_SRC puts
it), relative to the checkout inside it, else absolute. `<cuda>` stands for the CUDA include folders of
the host that scans: toolkit headers are not recorded (a result measured with the H200's toolkit is
still current on a host with pip's headers; the device and driver are judged on their own).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from strata_bench.errors import InputError
from strata_bench.kernels import closure
from strata_bench.kernels.sources import REPO_ROOT, kernels_dir

CUDA = "<cuda>"
KERNELS = "kernels_src"
ANY_ARCH = "sm_90"  # the include path is the same for every architecture


@dataclass(frozen=True)
class Unit:
    """One translation unit: its source and its -I folders in the compile's order (recorded names)."""

    source: str
    include: tuple[str, ...]


@dataclass(frozen=True)
class ClosureRecord:
    """The files some units read, as (recorded name, sha256) pairs sorted by name, and those units."""

    files: tuple[tuple[str, str], ...]
    units: tuple[Unit, ...]

    @property
    def hash(self) -> str:
        return hashlib.sha256(json.dumps(self.files).encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {"hash": self.hash, "files": dict(self.files),
                "units": [{"source": u.source, "include": list(u.include)} for u in self.units]}


def recorded_name(path: Path) -> str:
    """How a file or folder is named in a record (see the module docstring)."""
    path, kernels = Path(path).resolve(), kernels_dir()
    if path.is_relative_to(kernels):
        return (Path(KERNELS) / path.relative_to(kernels)).as_posix()
    if path.is_relative_to(REPO_ROOT):
        return path.relative_to(REPO_ROOT).as_posix()
    return str(path)


def located(name: str) -> Path:
    """Where a recorded name is on this host."""
    if name == KERNELS or name.startswith(KERNELS + "/"):
        return kernels_dir() / name[len(KERNELS) + 1:]
    return Path(name) if Path(name).is_absolute() else REPO_ROOT / name


# ---------------------------------------------------------------- recording

def family_records(families: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """provenance["sources"] for a run over `families` (name -> Family): one record per family over its
    own sources, and one per source a TOML variant added ("family:source")."""
    out: dict[str, dict[str, Any]] = {}
    for name, family in sorted(families.items()):
        own = [s for s in family.sources if s in type(family).sources]
        added = [s for s in family.sources if s not in own]
        out[name] = scan_units(tuple(_unit(family, s) for s in own)).to_json()
        for source in added:
            unit = _unit(family, source)
            out[f"{name}:{unit.source}"] = scan_units((unit,)).to_json()
    return out


def _unit(family: Any, source: str) -> Unit:
    """A family's source as compile_source compiles it: the same file and the same include path."""
    from strata_bench.kernels import build

    root, path = build.resolve_source(source, family.kernels_root)
    options = build.compile_options(ANY_ARCH, build.family_source_options(family, source), root)
    cuda = {Path(d).resolve() for d in build.cuda_include_dirs()}
    include: list[str] = []
    for folder in closure.include_dirs(options):
        name = CUDA if folder in cuda else recorded_name(folder)
        if not include or include[-1] != name:
            include.append(name)
    return Unit(recorded_name(path), tuple(include))


def scan_units(units: tuple[Unit, ...]) -> ClosureRecord:
    """The closure record of some units, scanned now on this host (a unit whose source is gone reads
    nothing)."""
    from strata_bench.kernels.build import cuda_include_dirs

    cuda = cuda_include_dirs()
    files: dict[str, str] = {}
    for unit in units:
        options = [f"-I{d}" for name in unit.include for d in (cuda if name == CUDA else [located(name)])]
        found = closure.scan(located(unit.source), options, cuda)
        files.update((recorded_name(f.path), f.sha256) for f in found.files)
    return ClosureRecord(tuple(sorted(files.items())), units)


# ---------------------------------------------------------------- judging

def parse(value: Any) -> dict[str, ClosureRecord]:
    """provenance["sources"] read back; InputError naming what is malformed."""
    if not isinstance(value, dict):
        raise InputError("sources is not an object")
    return {str(key): _parse_one(key, body) for key, body in value.items()}


def _parse_one(key: str, body: Any) -> ClosureRecord:
    try:
        files = tuple(sorted((str(k), str(v)) for k, v in body["files"].items()))
        units = tuple(Unit(str(u["source"]), tuple(str(d) for d in u["include"])) for u in body["units"])
    except (TypeError, KeyError, AttributeError):
        raise InputError(f"sources: {key}: not a closure record (files and units)") from None
    return ClosureRecord(files, units)


def changes(old: ClosureRecord, new: ClosureRecord) -> tuple[str, ...]:
    """What differs from `old` to `new`, file by file: "kernels_src/mmvq/mmvq.cu changed", "... added",
    "... removed" (empty: the same closure)."""
    before, after = dict(old.files), dict(new.files)
    out = []
    for name in sorted(before.keys() | after.keys()):
        if name not in after:
            out.append(f"{name} removed")
        elif name not in before:
            out.append(f"{name} added")
        elif before[name] != after[name]:
            out.append(f"{name} changed")
    return tuple(out)


def current(record: ClosureRecord) -> ClosureRecord:
    """The closure of the recorded units as the sources stand now."""
    return scan_units(record.units)
