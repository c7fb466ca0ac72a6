"""A disk cache of the float64 references: they are pure functions of the case, its input bytes and the
code that computes them (the package's Python sources, gguf-py, numpy), so a rerun after a kernel edit
loads them instead of computing them again.

Key: sha256 over the case, every input array's dtype, shape and bytes (a large array's bytes as the
sha256 of its pieces' sha256s; nested dicts, lists and tuples walked; scalars and slices by repr), the
hash of the .py files that compute references (code_hash) and the gguf and numpy versions and the BLAS
thread settings the references are computed under.
An input the key cannot describe (any other object) means no caching for that case. Entries are .ref
files (a JSON header, then each array's raw bytes, 64-byte aligned, read as views of the file mapped in
memory: no copy and no checksum pass, which cost ~1 s of a warm run as .npz) written to a temporary
name and renamed, so a reader never sees half a file; one that cannot be read (or whose size is not
its header's) is computed again. Only built-in families are cached (a user
family's reference code lies outside the hashed sources), and only entries up to MAX_ENTRY_BYTES; an
array two references share (bit for bit) is stored once. A tolerance is stored in the header where it
is one float, and as one more array where each element has its own bound; each reference's statistics
(checks/refstats.py) are in the header too. The default matrix filled
about 1.2 GB before per-element bounds; each bound array is as large as its reference, so more now.

Folder: $STRATA_CACHE_DIR/references, else ~/.cache/strata-bench/references; STRATA_REF_CACHE=off
turns the cache off.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import weakref
import math
import mmap
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from strata_bench.cases import Case, Expected, Family
from strata_bench.checks import pieces
from strata_bench.checks.refstats import RefStats, reference_stats

KEY_VERSION = 5  # bump when the key or the entry layout changes
# The default cases' largest entry (moe_combine 1000 x 2048) is 172 MiB with its per-element bounds (93 MiB
# without): one over the limit is computed in the loop on every run, which costs more than its disk space.
MAX_ENTRY_BYTES = 192 << 20
_PACKAGE = Path(__file__).resolve().parents[1]
# Package folders no reference is computed in (families, formats, numerics, data, cases, kernels and the
# kit are hashed).
_NOT_REFERENCE_CODE = ("checks", "cli", "report", "results", "stats", "ab", "timing", "gpu", "runs", "workloads",
                       "engine")


def cache_dir() -> Path:
    """Where entries live (never inside the package)."""
    root = os.environ.get("STRATA_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "strata-bench") / "references"


def enabled() -> bool:
    return os.environ.get("STRATA_REF_CACHE", "on").lower() not in ("off", "0", "no", "false")


def code_hash(blas: tuple | None = None) -> str:
    """sha256 of the package's .py files that can compute a reference (path and bytes; the folders that
    only run, check, time or show results are left out, so editing them keeps the cache), the gguf and
    numpy versions, and the BLAS thread settings the references are computed under (`blas`, as
    blas_threads() gives them; default: compute_settings())."""
    return _code_hash(tuple(compute_settings()) if blas is None else tuple(blas))


@lru_cache(maxsize=4)
def _code_hash(blas: tuple) -> str:
    import gguf.quants  # noqa: F401  (its version is part of the key)
    from importlib.metadata import version

    h = hashlib.sha256(json.dumps([KEY_VERSION, version("gguf"), np.__version__, list(blas)]).encode())
    for path in sorted(_PACKAGE.rglob("*.py")):
        if path.relative_to(_PACKAGE).parts[0] in _NOT_REFERENCE_CODE:
            continue
        h.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# The settings refpool's workers compute under: one BLAS thread each (set before their numpy loads).
SINGLE_THREAD = dict.fromkeys(BLAS_THREAD_VARIABLES, "1")


def blas_threads(env: Mapping[str, str] | None = None) -> tuple:
    """What decides the BLAS's thread count (the core count and the variables, as in `env`, default this
    process's environment, which holds them as they were when its numpy loaded unless changed since): a
    float64 matrix product's sum order, and so a reference's last bits, depend on it (27 of the default
    matrix's 905 references differ between 1 and 2 OpenBLAS threads; 2 and 16 agree), so a cache shared
    between hosts or settings keeps each one's references apart."""
    env = os.environ if env is None else env
    return (os.cpu_count(), *(env.get(name) for name in BLAS_THREAD_VARIABLES))


def single_thread_blas() -> tuple:
    """The settings of refpool's workers (one BLAS thread), as blas_threads() describes them."""
    return blas_threads(SINGLE_THREAD)


def compute_settings() -> tuple:
    """The BLAS settings this process computes built-in references under: one thread where it can set
    that at run time (checks/blas.py: the workers' settings, so the loop and the workers compute the
    same bits), else its own."""
    from strata_bench.checks import blas

    return single_thread_blas() if blas.can_set() else blas_threads()


class _Unkeyable(Exception):
    """An input the key cannot describe."""


# Digests of large arrays by identity (while the array lives): mmvq's weights are the same objects across
# its cases, and hashing them again costs ~1.5 s a run. Host inputs are never changed in place (the
# families' lru_caches already share them between cases), so identity is enough.
_DIGESTS: dict[int, tuple[weakref.ref, str]] = {}
_MEMO_BYTES = 1 << 20
# Arrays from this size are hashed as pieces of TREE_PIECE bytes on several threads (_bytes_digest).
TREE_BYTES = 4 << 20
TREE_PIECE = 1 << 20


def _array_digest(a: np.ndarray) -> str:
    if a.dtype.hasobject:
        raise _Unkeyable(f"object array {a.dtype}")
    memo = a.nbytes >= _MEMO_BYTES
    hit = _DIGESTS.get(id(a)) if memo else None
    if hit is not None and hit[0]() is a:
        return hit[1]
    digest = _bytes_digest(np.ascontiguousarray(a).view(np.uint8).reshape(-1).data)
    if memo:
        try:
            _DIGESTS[id(a)] = (weakref.ref(a, lambda _r, k=id(a): _DIGESTS.pop(k, None)), digest)
        except TypeError:  # not weak-referenceable: no memo
            pass
    return digest


def _bytes_digest(data: memoryview) -> str:
    """sha256 of the bytes, or, from TREE_BYTES up, sha256 over the sha256 of each TREE_PIECE bytes, the
    pieces hashed on the pieces' threads (hashlib releases the GIL): a warm run hashes 1.2 GB of inputs,
    0.9 s on one core."""
    if data.nbytes < TREE_BYTES:
        return hashlib.sha256(data).hexdigest()
    starts = range(0, data.nbytes, TREE_PIECE)
    digests = pieces.run([partial(_piece_digest, data, i) for i in starts])
    return hashlib.sha256(b"tree%d:" % TREE_PIECE + b"".join(digests)).hexdigest()


def _piece_digest(data: memoryview, start: int) -> bytes:
    return hashlib.sha256(data[start:start + TREE_PIECE]).digest()


def _feed(h: Any, value: Any) -> None:
    """Add one input value to the hash, walking containers; _Unkeyable for anything else."""
    if isinstance(value, np.ndarray):
        h.update(f"A{value.dtype.str}{value.shape}:{_array_digest(value)};".encode())
    elif isinstance(value, Mapping):
        h.update(f"D{len(value)}{{".encode())
        for key in sorted(value, key=repr):
            h.update(f"{key!r}=".encode())
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(f"{type(value).__name__}{len(value)}[".encode())
        for item in value:
            _feed(h, item)
        h.update(b"]")
    elif value is None or isinstance(value, (bool, int, float, str, bytes, slice, np.generic)):
        h.update(f"{type(value).__name__}:{value!r};".encode())
    else:
        raise _Unkeyable(type(value).__name__)


def reference_key(case: Case, host: Mapping[str, Any], blas: tuple | None = None) -> str | None:
    """The entry's key (for references computed under the BLAS settings `blas`, default
    compute_settings()), or None where an input cannot be keyed."""
    h = hashlib.sha256(f"{code_hash(blas)}|{case!r}|".encode())
    try:
        _feed(h, host)
    except _Unkeyable:
        return None
    return h.hexdigest()


def _builtin(family: Family) -> bool:
    return type(family).__module__.startswith("strata_bench.")


_MAGIC = b"STRATREF"  # then the header's length (8 bytes, little-endian), the JSON header, the arrays
_ALIGN = 64


def _load(path: Path) -> tuple[tuple[Expected, ...], tuple[RefStats | None, ...]] | None:
    """The entry's references, their arrays read-only views of the file mapped in memory (no copy: a warm
    run reads over 1.2 GB), and each one's statistics where the entry holds them; None where the file is
    missing, cut (its size is not the header's) or foreign."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 16 or f.read(8) != _MAGIC:
                return None
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")).decode())
            if header["size"] != size:
                return None
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        arrays = [np.frombuffer(mapped, np.dtype(a["dtype"]), math.prod(a["shape"]), a["offset"]).reshape(a["shape"])
                  for a in header["arrays"]]
        tols = [arrays[m["tol_array"]] if "tol_array" in m else m["tol"] for m in header["meta"]]
        refs = tuple(Expected(m["output"], arrays[m["array"]], tol, m["why"], m["label"])
                     for m, tol in zip(header["meta"], tols))
        return refs, tuple(RefStats.from_json(m["stats"]) if "stats" in m else None for m in header["meta"])
    except (OSError, EOFError, ValueError, KeyError, TypeError, IndexError):  # missing, cut or foreign
        return None


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a is b:
        return True
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    unsigned = np.dtype(f"u{a.dtype.itemsize}") if a.dtype.itemsize in (1, 2, 4, 8) else None
    return bool(np.array_equal(a.view(unsigned), b.view(unsigned))) if unsigned else a.tobytes() == b.tobytes()


def _storable(e: Expected) -> bool:
    """A plain array reference with text fields and a float (or plain array) tolerance."""
    tol_ok = type(e.tol) is float or (isinstance(e.tol, np.ndarray) and not e.tol.dtype.hasobject)
    return (isinstance(e.ref, np.ndarray) and not e.ref.dtype.hasobject and tol_ok and isinstance(e.output, str)
            and isinstance(e.why, str) and isinstance(e.label, str))


def _layout(refs: tuple[Expected, ...]) -> tuple[list[np.ndarray], list[dict[str, int]]] | None:
    """The distinct arrays of an entry (bit for bit) and, per reference, which one is its values
    ("array") and, for per-element bounds, which one is its tolerance ("tol_array"); None where an entry
    cannot be stored (a reference that is not a plain array with a float or array tolerance, or too big)."""
    if not all(_storable(e) for e in refs):
        return None
    arrays: list[np.ndarray] = []

    def index_of(a: np.ndarray) -> int:
        found = next((i for i, b in enumerate(arrays) if _same_bits(a, b)), None)
        if found is None:
            arrays.append(a)
            found = len(arrays) - 1
        return found

    which = []
    for e in refs:
        which.append({"array": index_of(e.ref)})
        if isinstance(e.tol, np.ndarray):
            which[-1]["tol_array"] = index_of(e.tol)
    return (arrays, which) if sum(a.nbytes for a in arrays) <= MAX_ENTRY_BYTES else None


def _store(path: Path, refs: tuple[Expected, ...], arrays: list[np.ndarray], which: list[dict[str, int]]) -> bool:
    """Write the entry (False where the disk refused): the header, then each array's bytes (C order) at an
    offset aligned to 64 bytes, to a temporary name renamed at the end."""
    # Each reference's statistics too (a warm run's checks read them instead of a pass over the reference).
    meta = [{"output": e.output, **w, **({} if "tol_array" in w else {"tol": e.tol}), "why": e.why, "label": e.label,
             "stats": reference_stats(e).to_json()} for e, w in zip(refs, which)]
    specs = [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in arrays]
    header, previous = b"", None
    while header != previous:  # the offsets depend on the header's length, which depends on their digits
        previous = header
        offset = -(-(16 + len(header)) // _ALIGN) * _ALIGN
        for spec, a in zip(specs, arrays):
            spec["offset"] = offset
            offset += -(-a.nbytes // _ALIGN) * _ALIGN
        header = json.dumps({"meta": meta, "arrays": specs, "size": offset}).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem[:16], suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + len(header).to_bytes(8, "little") + header)
                for spec, a in zip(specs, arrays):
                    f.write(b"\0" * (spec["offset"] - f.tell()))
                    f.write(np.ascontiguousarray(a).view(np.uint8).data if a.nbytes else b"")
                f.write(b"\0" * (offset - f.tell()))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:  # a read-only or full disk only costs the speed-up
        return False
    return True


def entry_path(key: str) -> Path:
    return cache_dir() / key[:2] / f"{key}.ref"


def _marker_path(case: Case, blas: tuple | None) -> Path:
    name = hashlib.sha256(f"{code_hash(blas)}|{case!r}".encode()).hexdigest()
    return cache_dir() / "cases" / name[:2] / name


def mark(case: Case, blas: tuple | None, key: str) -> None:
    """Note which entry `case` was last stored in, so refpool can tell a warm case without making its
    inputs (the entry's own key, from the input bytes, still decides every read)."""
    path = _marker_path(case, blas)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name[:8], suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(key)
        os.replace(tmp, path)
    except OSError:
        pass


def probably_cached(case: Case, blas: tuple | None = None) -> bool:
    """Whether an entry stored for `case` under the BLAS settings `blas` (default: this process's) is
    still there; from the case alone (no inputs made): refpool skips such cases. True only says that the
    entry of the inputs the case had when it was stored exists; inputs read from a file edited since
    then have another key, which the loop then misses and computes."""
    try:
        key = _marker_path(case, blas).read_text()
    except OSError:
        return False
    return len(key) == 64 and entry_path(key).exists()


@dataclass(frozen=True)
class Lookup:
    """What the cache holds for a case: its references (None: a miss), and where references computed
    for it are stored (`path`, None: not cached) and the BLAS settings mark() notes them under."""

    refs: tuple[Expected, ...] | None
    path: Path | None = None
    blas: tuple | None = None
    stats: tuple[RefStats | None, ...] = ()  # a hit's statistics per reference (None: not in the entry)


def lookup_references(family: Family, case: Case, host: Mapping[str, Any], on_miss: Callable[[], None] | None = None,
                      blas: tuple | None = None) -> Lookup:
    """The entry of `case` (inputs `host`), read without computing anything. `on_miss` (optional) is
    called once where it is missing (refpool waits there for the worker filling it), and the entry is
    read again after it. `blas` (optional): the BLAS settings the entry is looked up under (refpool's
    workers' single thread); one computed in this process is computed under compute_settings(), so
    where those differ a miss is looked up, and stored, under them instead."""
    key = reference_key(case, host, blas) if enabled() and _builtin(family) else None
    if key is None:
        return Lookup(None)
    path = entry_path(key)
    hit = _load(path)
    if hit is None and on_miss is not None:
        on_miss()
        hit = _load(path)
    if hit is None and blas is not None and tuple(blas) != compute_settings():
        path = entry_path(reference_key(case, host))
        hit = _load(path)
    refs, stats = hit if hit is not None else (None, ())
    return Lookup(refs, path, blas if path == entry_path(key) else None, stats)


def computed_references(family: Family, case: Case, host: Mapping[str, Any], found: Lookup,
                        compute: Callable[[], Any] | None = None) -> tuple[Expected, ...]:
    """found's references where it is a hit; else family.reference(case, host) (or `compute`), stored
    where `found` says. A built-in family's references are computed with one BLAS thread where it can
    be set (cached or not)."""
    from strata_bench.checks import blas as threads

    if found.refs is not None:
        return found.refs
    if not _builtin(family):
        return tuple(compute() if compute else family.reference(case, host))
    with threads.one_thread():
        refs = tuple(compute() if compute else family.reference(case, host))
    layout = _layout(refs) if found.path is not None else None
    if layout is not None and _store(found.path, refs, *layout):
        mark(case, found.blas, found.path.stem)
    return refs


def cached_references(family: Family, case: Case, host: Mapping[str, Any],
                      compute: Callable[[], Any] | None = None,
                      on_miss: Callable[[], None] | None = None, blas: tuple | None = None) -> tuple[Expected, ...]:
    """family.reference(case, host), from the disk cache when an entry exists, stored there when not
    (lookup_references, then computed_references: `on_miss` and `blas` as the one takes them, `compute`
    as the other)."""
    return computed_references(family, case, host, lookup_references(family, case, host, on_miss, blas), compute)
