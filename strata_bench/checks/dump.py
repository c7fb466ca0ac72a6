"""`parity --dump-failures DIR`: what a failing case ran on and produced, for debugging it offline.

Per failing case, DIR/<case name made safe for a file name>.npz holds numeric arrays only (np.load
reads it with allow_pickle=False):
    input/<key>[/<key>...]     the case's host inputs (nested dicts and lists as path parts)
    output/<variant>/<name>    each variant's outputs, as the kernel wrote them
    reference/<i>/values       the i-th float64 reference
    reference/<i>/tol          its tolerance (a 0-d array where one bound holds for every element)
and a .json beside it the rest: the case, its device, the failed checks, the command that reruns it,
each reference's output, label and derivation, and the inputs that are not numbers (text, slices).
A case that faulted has no dump: its outputs went with the CUDA context.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from strata_bench.cases import Expected
from strata_bench.errors import InputError

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]+")
_MAX_STEM = 160  # well inside the 255 bytes a file name may take


def check_dump_folder(folder: str | os.PathLike) -> Path:
    """The folder, if it is one that can be written or made; InputError naming it otherwise (checked
    before the run, so a bad folder costs no GPU work). Nothing is created here."""
    if not os.fspath(folder):  # Path("") is ".": the working directory, unasked
        raise InputError("--dump-failures '': the path is empty")
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise InputError(f"--dump-failures {folder}: exists and is not a folder")
    nearest = path if path.exists() else next(p for p in path.absolute().parents if p.exists())
    if not nearest.is_dir():
        raise InputError(f"--dump-failures {folder}: cannot be made, {nearest} is not a folder")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise InputError(f"--dump-failures {folder}: cannot write in {nearest}")
    return path


def safe_stem(name: str) -> str:
    """A file name stem from a case name: every run of other characters than letters, digits and
    . _ = , + - becomes one '_' ('mmvq/iq2_xs/64x256/n4/edge:2' -> 'mmvq_iq2_xs_64x256_n4_edge_2');
    a long one is cut and given a hash of the whole name, so it stays unique."""
    stem = _UNSAFE.sub("_", name).strip("_.") or "case"
    if len(stem) > _MAX_STEM:
        stem = stem[:_MAX_STEM - 13] + "-" + hashlib.sha256(name.encode()).hexdigest()[:12]
    return stem


def dump_arrays(host: Mapping[str, Any], outputs: Mapping[str, Mapping[str, np.ndarray]],
                refs: Iterable[Expected]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(the arrays of a dump by key, the inputs that are not numbers by key, as JSON values) from the
    host inputs, each variant's outputs ({variant: {name: array}}) and the references."""
    arrays: dict[str, np.ndarray] = {}
    other: dict[str, Any] = {}
    for key, value in host.items():
        _add_input(f"input/{key}", value, arrays, other)
    for variant, named in outputs.items():
        arrays.update({f"output/{variant}/{name}": np.asarray(a) for name, a in named.items()})
    for i, exp in enumerate(refs):
        arrays[f"reference/{i}/values"] = np.asarray(exp.ref, dtype=np.float64)
        arrays[f"reference/{i}/tol"] = np.asarray(exp.tol, dtype=np.float64)
    return arrays, other


def _add_input(key: str, value: Any, arrays: dict[str, np.ndarray], other: dict[str, Any]) -> None:
    """One input under `key`: a numeric array or number as an array, a dict or list walked (a list of
    numbers as one array), anything else (text, a slice, None) as JSON text."""
    if isinstance(value, Mapping):
        for sub, item in value.items():
            _add_input(f"{key}/{sub}", item, arrays, other)
        return
    if isinstance(value, (list, tuple)) and not all(isinstance(v, (int, float, np.number)) for v in value):
        for i, item in enumerate(value):
            _add_input(f"{key}/{i}", item, arrays, other)
        return
    if isinstance(value, (np.ndarray, np.generic, int, float, list, tuple)) and not isinstance(value, str):
        array = np.asarray(value)
        if array.dtype.kind in "biufcV" and not array.dtype.hasobject:  # what np.save writes without pickle
            arrays[key] = array
            return
    other[key] = value if isinstance(value, (str, bool, int, float, type(None))) else repr(value)


class FailureDump:
    """Writes one dump per failing case into `folder` (made at the first); hand it to CaseChecker as its
    on_failure. `rerun(result)` gives the command that reruns a case (for the .json), `warn` takes a
    line where a dump cannot be written (the run goes on: its results are kept without it)."""

    def __init__(self, folder: Path, rerun: Callable[[Any], str] | None = None,
                 warn: Callable[[str], None] | None = None):
        self.folder = Path(folder)
        self.rerun = rerun
        self.warn = warn
        self.written: list[Path] = []

    def __call__(self, result: Any, host: Mapping[str, Any], runs: Mapping[str, Any],
                 refs: Iterable[Expected]) -> Path | None:
        refs = tuple(refs)
        arrays, other = dump_arrays(host, {v: run.outputs for v, run in runs.items()}, refs)
        path = self._free_path(safe_stem(result.case.name))
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                np.savez(f, **arrays)
            path.with_suffix(".json").write_text(json.dumps(self._sidecar(result, refs, other, arrays), indent=2,
                                                            default=str) + "\n")
        except OSError as exc:
            if self.warn is not None:
                self.warn(f"--dump-failures: could not write {path}: {exc}")
            return None
        self.written.append(path)
        return path

    def _free_path(self, stem: str) -> Path:
        """DIR/stem.npz, or stem-2, -3, ... where this run already wrote one (the same case on another
        device, or two names made the same)."""
        taken = {p.name for p in self.written}
        name, n = f"{stem}.npz", 1
        while name in taken:
            n += 1
            name = f"{stem}-{n}.npz"
        return self.folder / name

    def _sidecar(self, result: Any, refs: tuple[Expected, ...], other: Mapping[str, Any],
                 arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
        c = result.case
        return {"case": c.name, "family": c.family, "format": c.fmt, "rows": c.rows, "cols": c.cols,
                "ncols": c.ncols, "data": c.data, "variants": list(c.variants), "params": dict(c.params),
                "device": result.device, "status": result.status.value,
                "rerun": self.rerun(result) if self.rerun is not None else None,
                "failed": [{"check": ch.check, "variant": ch.variant, "detail": ch.detail}
                           for ch in result.checks if not ch.ok],
                "references": [{"index": i, "output": e.output, "label": e.label, "why": e.why,
                                "tol": float(e.tol) if np.ndim(e.tol) == 0 else "per element"}
                               for i, e in enumerate(refs)],
                "other_inputs": dict(other), "arrays": sorted(arrays)}
