"""Rows of a GGUF file's tensors as cached fixtures: what `--gguf FILE --tensor REGEX [--rows A:B]` reads.

The file's structure is validated first (gguf_layout: a file that is not GGUF, truncated or corrupt is
one InputError before any tensor byte is used); then only the asked rows are read, through a memory
map, so a 10 GB model costs the rows, not the file. The fixtures are kept in a cache folder
($STRATA_CACHE_DIR/gguf-fixtures, else ~/.cache/strata-bench/gguf-fixtures; never the package), named
by the file's sha256 prefix, the tensor and the rows, with the file name, full sha256, tensor, rows and
type as provenance. Every request is checked before anything is written, and the store writes all
fixtures or none, so bad input leaves the cache as it was.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from strata_bench.data.fixture import Fixture, FixtureRef, ref_from_entry
from strata_bench.data.gguf_layout import GgufLayout, TensorInfo, read_layout
from strata_bench.data.store import gguf_cache_root as cache_root  # this module's own name for it
from strata_bench.errors import InputError

DEFAULT_ROWS = 64  # rows read from each tensor when no --rows is given (as `fixtures from-gguf`)
SHA_INDEX = "sha256-index.json"  # path, size, mtime -> sha256: a large model is hashed once


def file_sha256(path: Path) -> str:
    """The file's sha256, remembered per (resolved path, size, mtime) in the cache's index."""
    from strata_bench.data.store import atomic_path, folder_lock, sha256_file

    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    index_path = cache_root() / SHA_INDEX
    known = _read_index(index_path).get(key)
    if isinstance(known, str):
        return known
    digest = sha256_file(path)  # outside the lock: a large model takes a while, and others may read meanwhile
    with folder_lock(cache_root()):  # re-read under the lock, so a concurrent run's entries are kept
        index = _read_index(index_path)
        index[key] = digest
        with atomic_path(index_path) as tmp:
            tmp.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return digest


def _read_index(path: Path) -> dict:
    try:
        index = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return index if isinstance(index, dict) else {}


def read_rows(layout: GgufLayout, tensor: TensorInfo, first: int, stop: int) -> np.ndarray:
    """Rows first:stop of a validated tensor as (rows, bytes per row) uint8, read through a memory map
    (only those pages are touched)."""
    row_bytes = tensor.n_bytes // tensor.n_rows
    mapped = np.memmap(layout.path, dtype=np.uint8, mode="r", offset=tensor.offset + first * row_bytes,
                       shape=(stop - first, row_bytes))
    try:
        return np.array(mapped)
    finally:
        del mapped


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-") or "tensor"


def _matching(layout: GgufLayout, tensor_regex: str) -> list[TensorInfo]:
    from strata_bench.formats.gguf_types import formats_by_gguf_type

    try:
        pattern = re.compile(tensor_regex)
    except (re.error, OverflowError) as exc:  # OverflowError: a repetition count past what re can hold
        raise InputError(f"--tensor {tensor_regex!r} is not a regular expression: {exc}") from None
    tensors = [t for t in layout.tensors if pattern.search(t.name)]
    if not tensors:
        names = ", ".join(t.name for t in layout.tensors[:8])
        raise InputError(f"--tensor {tensor_regex!r} matches no tensor in {layout.path.name} (tensors: {names}, ...)")
    known = [t for t in tensors if t.type_id in formats_by_gguf_type()]
    # A broad regex takes the quantized tensors and leaves norms and the like; one match must be known.
    return known if len(tensors) > 1 and known else tensors


def _row_range(tensor: TensorInfo, rows: tuple[int, int] | None) -> tuple[int, int]:
    if rows is None:
        return 0, min(DEFAULT_ROWS, tensor.n_rows)
    first, stop = rows
    if first < 0 or stop <= first:
        raise InputError(f"--rows {first}:{stop} is {'empty' if stop == first else 'reversed'}: need 0 <= A < B")
    if stop > tensor.n_rows:
        raise InputError(f"--rows {first}:{stop} is past the end of {tensor.name} ({tensor.n_rows} rows)")
    return first, stop


def cache_name(file_sha: str, tensor: str, first: int, stop: int) -> str:
    """The cached fixture's name: the file's sha256 prefix, the tensor and the rows."""
    return f"gguf-{file_sha[:12]}-{_slug(tensor)}-r{first}-{stop}"


def cached_gguf_fixtures(path: str | Path, tensor_regex: str, rows: tuple[int, int] | None = None) -> list[FixtureRef]:
    """The fixtures of every matching tensor's rows (read and cached where the cache lacks them)."""
    from strata_bench.data.gguf_import import tensor_format
    from strata_bench.data.store import _read_one_manifest, save_fixtures

    path = Path(path)
    layout = read_layout(path)
    tensors = _matching(layout, tensor_regex)
    plan = []
    for tensor in tensors:  # every tensor checked before any row is read: bad input writes nothing
        plan.append((tensor, tensor_format(tensor), _row_range(tensor, rows)))
    file_sha = file_sha256(path)
    root = cache_root()
    have = _read_one_manifest(root)["fixtures"] if (root / "manifest.json").is_file() else {}
    refs, new = [], []
    for tensor, fmt, (first, stop) in plan:
        name = cache_name(file_sha, tensor.name, first, stop)
        entry = have.get(name)
        if entry is not None:
            prov = entry.get("provenance") or {}
            if prov.get("file_sha256") != file_sha or prov.get("tensor") != tensor.name:
                raise InputError(f"gguf cache {root}: {name} holds {prov.get('tensor')!r} of another file; "
                                 "remove it and run again")
            refs.append(ref_from_entry(name, entry))
            continue
        provenance = {"kind": "gguf", "file": path.name, "file_sha256": file_sha, "tensor": tensor.name,
                      "rows": [first, stop], "type": fmt.name, "path": str(path.resolve())}
        fix = Fixture(name, fmt.name, stop - first, int(tensor.shape[0]), read_rows(layout, tensor, first, stop),
                      provenance)
        new.append(fix)
        refs.append(FixtureRef(name, fix.fmt, fix.rows, fix.cols, provenance))
    if new:
        save_fixtures(new, root)
    return refs
