"""The fixture store: `<root>/<name>.npz` files listed in `<root>/manifest.json`.

Each manifest entry holds the file's sha256 and a sha256 of its dequantized float32 values, so
`verify_fixtures` catches both a changed file and a changed oracle. Files are read back with
allow_pickle=False. Every write goes to a temporary name first and is renamed into place, so a failed
write leaves nothing behind; every read-modify-write of a manifest holds the folder's lock, so two
imports into one folder at once both keep their entries.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from strata_bench.data.fixture import Fixture
from strata_bench.errors import InputError
from strata_bench.formats import get_format

MANIFEST_NAME = "manifest.json"
MANIFEST_SCHEMA = 1


# --- roots and hashes --------------------------------------------------------------------------
# Two folders: the user's ($STRATA_FIXTURES, else ./fixtures of the working directory), where every write
# goes, and the built-in set (the checkout's fixtures/, or the wheel's package data), never written by a
# default. A read with no folder given looks in the user's folder first, then the built-in set.
def builtin_root() -> Path:
    """The built-in fixtures: the checkout's fixtures/, or strata_bench/builtin_fixtures in a wheel."""
    from strata_bench.kernels.sources import builtin_data

    return builtin_data("fixtures")


def default_root() -> Path:
    """Where fixtures are written by default: $STRATA_FIXTURES, else ./fixtures of the working directory."""
    return Path(os.environ["STRATA_FIXTURES"]) if os.environ.get("STRATA_FIXTURES") else Path.cwd() / "fixtures"


def _existing(root: Path, what: str) -> Path:
    if not root.is_dir():
        raise InputError(f"fixtures folder {what}{root} does not exist")
    return root


def search_roots(root: str | Path | None = None) -> list[Path]:
    """The folders a read looks in, in order. A folder given explicitly (argument or $STRATA_FIXTURES)
    must exist: a typo would otherwise silently drop every case that uses its fixtures."""
    if root is not None:
        return [_existing(Path(root), "")]
    if os.environ.get("STRATA_FIXTURES"):
        user = _existing(default_root(), "$STRATA_FIXTURES=")
    else:
        user = default_root()
    roots = [r for r in (user, builtin_root()) if r.is_dir()]
    return list({r.resolve(): r for r in roots}.values())


def write_root(root: str | Path | None = None) -> Path:
    """The folder a write goes to: `root`, else the user's; never the built-in set by default."""
    if root is not None:
        return Path(root)
    target = default_root()
    if target.resolve() == builtin_root().resolve():
        raise InputError(f"refusing to write into the built-in fixtures {target}: set $STRATA_FIXTURES, "
                         f"run from another folder, or pass --root {target} to change the built-in set")
    return target


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def values_sha256(fmt: str, raw: np.ndarray) -> str:
    """Hex sha256 of the oracle's little-endian float32 dequantization of `raw`."""
    values = np.ascontiguousarray(get_format(fmt).dequantize(raw), dtype="<f4")
    return hashlib.sha256(values.tobytes()).hexdigest()


# --- atomic writes -----------------------------------------------------------------------------
@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """A temporary path beside `final`, renamed onto it only if the block finishes."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` (flock of the directory itself, so no lock file shows in it)
    while a block reads, changes and replaces a file there; other processes wait for it."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_beside(final: Path) -> Path:
    """An empty temporary file beside `final`, with the usual mode (mkstemp makes 0600)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    os.close(fd)
    os.chmod(name, 0o666 & ~_umask())
    return Path(name)


# --- npz files ---------------------------------------------------------------------------------
def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An uncompressed .npz that np.load reads, with fixed zip timestamps so equal arrays give equal
    bytes (np.savez stamps the current time, which would change every sha256 on each regeneration)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for key, array in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def _fixture_arrays(fix: Fixture) -> dict[str, np.ndarray]:
    arrays = {"raw": fix.raw, "meta": np.array(json.dumps(
        {"name": fix.name, "fmt": fix.fmt, "rows": fix.rows, "cols": fix.cols, "provenance": fix.provenance}))}
    if fix.activations is not None:
        arrays["activations"] = fix.activations
    return arrays


def _read_npz(path: Path, name: str) -> Fixture:
    try:
        _check_members(path, name)
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise InputError(f"fixture {name!r}: {path.name} holds pickled objects; refused") from None
        raise InputError(f"fixture {name!r}: {path.name} is not a readable .npz ({exc})") from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"fixture {name!r}: {path.name} is not a readable .npz ({exc})") from None
    missing = {"raw", "meta"} - set(arrays)
    if missing:
        raise InputError(f"fixture {name!r}: {path.name} lacks {sorted(missing)}")
    try:
        meta = json.loads(str(arrays["meta"]))
        return Fixture(meta["name"], meta["fmt"], int(meta["rows"]), int(meta["cols"]), arrays["raw"],
                       meta.get("provenance", {}), arrays.get("activations"))
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"fixture {name!r}: {path.name} has bad metadata ({exc})") from None


_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _check_members(path: Path, name: str) -> None:
    """The members fit in the file, and every .npy member holds the bytes its header declares: np.load
    allocates the declared shape before it reads (a header of 10**15 values in a file of 100 bytes was a
    MemoryError)."""
    with zipfile.ZipFile(path) as archive:
        _check_inflated(archive.infolist(), path, name)
        for info in archive.infolist():
            with archive.open(info) as member:
                header = _NPY_HEADERS.get(np.lib.format.read_magic(member))
                if header is None:
                    continue  # a version np.load refuses itself, in one line
                shape, _fortran, dtype = header(member)
            declared = math.prod(shape) * dtype.itemsize
            if declared > info.file_size:
                raise InputError(f"fixture {name!r}: {path.name}: {info.filename} declares {declared} bytes "
                                 f"(shape {list(shape)}, {dtype}) but holds {info.file_size} bytes")


def _check_inflated(members: list[zipfile.ZipInfo], path: Path, name: str) -> None:
    """The members' uncompressed sizes, from the zip's directory, add up to no more than the file's own
    size: write_npz stores them uncompressed, so no fixture holds more. A zip bomb (gigabytes of zeros
    deflated into kilobytes, each header telling the truth) is refused before a byte of it is inflated;
    zipfile inflates a member to no more than its declared size, so the directory's figure is the bound."""
    size = path.stat().st_size
    inflated = sum(info.file_size for info in members)
    if inflated > size:
        raise InputError(f"fixture {name!r}: {path.name}: its members declare {inflated} bytes uncompressed, "
                         f"more than the file's {size} (a fixture's members are stored uncompressed)")


# --- the manifest ------------------------------------------------------------------------------
def _read_one_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST_NAME
    if not path.exists():
        return {"schema": MANIFEST_SCHEMA, "fixtures": {}}
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
        if not isinstance(manifest, dict) or not isinstance(manifest.get("fixtures"), dict):
            raise ValueError("no 'fixtures' table")
        for name, entry in manifest["fixtures"].items():
            _check_entry(name, entry)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"corrupt fixture manifest {path}: {exc}") from None
    return manifest


_ENTRY_FIELDS = {"file": str, "sha256": str, "values_sha256": str, "fmt": str, "rows": int, "cols": int}


def _check_entry(name: str, entry: Any) -> None:
    """A manifest entry must be a table with every field the store reads, of the right type."""
    if not isinstance(entry, dict):
        raise ValueError(f"entry {name!r} is {json.dumps(entry)}, not a table")
    for key, kind in _ENTRY_FIELDS.items():
        if not isinstance(entry.get(key), kind) or isinstance(entry.get(key), bool):
            raise ValueError(f"entry {name!r} has no {kind.__name__} {key!r}")
    if not isinstance(entry.get("provenance", {}), dict):
        raise ValueError(f"entry {name!r} has a provenance that is not a table")


def read_manifest(root: str | Path | None = None) -> dict[str, Any]:
    """The manifest of `root`, or with no root the user's entries over the built-in ones (an empty one
    where there is none); InputError when one is corrupt or an explicit folder does not exist."""
    merged: dict[str, Any] = {"schema": MANIFEST_SCHEMA, "fixtures": {}}
    for folder in reversed(search_roots(root)):
        merged["fixtures"].update(_read_one_manifest(folder)["fixtures"])
    return merged


def gguf_cache_root() -> Path:
    """The folder of rows cached by --gguf (data/gguf_cache.py): a fixture root searched last."""
    base = os.environ.get("STRATA_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "strata-bench") / "gguf-fixtures"


def _locate(name: str, root: str | Path | None) -> tuple[Path, dict[str, Any]]:
    """The folder holding fixture `name` and its entry (the user's folder wins over the built-in set;
    with no folder given, rows cached by --gguf are found last)."""
    roots = search_roots(root)
    if root is None:
        cache = gguf_cache_root()
        roots_read = roots + [cache] if cache.is_dir() else roots
    else:
        roots_read = roots
    for folder in roots_read:
        entry = _read_one_manifest(folder)["fixtures"].get(name)
        if entry is not None:
            return folder, entry
    known = ", ".join(sorted(read_manifest(root)["fixtures"])[:12]) or "none"
    where = " or ".join(str(r) for r in roots) or str(default_root())
    raise InputError(f"no fixture named {name!r} in {where} (known: {known})")


def _manifest_entry(fix: Fixture, file_sha: str) -> dict[str, Any]:
    return {"file": f"{fix.name}.npz", "sha256": file_sha, "values_sha256": values_sha256(fix.fmt, fix.raw),
            "fmt": fix.fmt, "rows": fix.rows, "cols": fix.cols, "provenance": fix.provenance,
            "activations": None if fix.activations is None else list(fix.activations.shape)}


# --- save, load, list, verify ------------------------------------------------------------------
def save_fixture(fix: Fixture, root: str | Path | None = None, force: bool = False) -> Path:
    """Write `<root>/<name>.npz` and its manifest entry; returns the .npz path.

    Saving identical content again is a no-op; replacing a fixture with other content needs `force`.
    """
    return save_fixtures([fix], root, force)[0]


def save_fixtures(fixes: list[Fixture], root: str | Path | None = None, force: bool = False) -> list[Path]:
    """Write several fixtures all or nothing: every name is checked free (or holding the same values,
    or `force`) and every file written under a temporary name before the first is renamed into place;
    the manifest is renamed last. Returns the .npz paths."""
    root = write_root(root)
    names = [fix.name for fix in fixes]
    if len(set(names)) != len(names):
        raise InputError(f"two fixtures would be named {next(n for n in names if names.count(n) > 1)!r}")
    entries = {fix.name: _manifest_entry(fix, "") for fix in fixes}
    # Read, checked and replaced under the folder's lock: else a second import that read the manifest
    # before the first renamed its own would write it back without the first's entries.
    with folder_lock(root):
        return _save_locked(fixes, entries, root, force)


def _save_locked(fixes: list[Fixture], entries: dict[str, dict[str, Any]], root: Path, force: bool) -> list[Path]:
    manifest = _read_one_manifest(root)
    for name, entry in entries.items():
        old = manifest["fixtures"].get(name)
        if old is not None and not force and old.get("values_sha256") != entry["values_sha256"]:
            raise InputError(f"fixture {name!r} already exists in {root} with other values "
                             "(choose another --name or pass --force)")
    finals = [root / f"{fix.name}.npz" for fix in fixes]
    temps: list[tuple[Path, Path]] = []
    try:
        for fix, final in zip(fixes, finals):
            temps.append((_temp_beside(final), final))
            write_npz(temps[-1][0], _fixture_arrays(fix))
            entries[fix.name]["sha256"] = sha256_file(temps[-1][0])
            manifest["fixtures"][fix.name] = entries[fix.name]
        manifest["fixtures"] = dict(sorted(manifest["fixtures"].items()))
        temps.append((_temp_beside(root / MANIFEST_NAME), root / MANIFEST_NAME))
        temps[-1][0].write_text(json.dumps(manifest, indent=1) + "\n")
        # Renamed in order, the manifest last, so it never names a file that is not there.
        for tmp, final in temps:
            os.replace(tmp, final)
    finally:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
    return finals


def load_fixture(name: str, root: str | Path | None = None) -> Fixture:
    """Load a fixture, refusing a file whose sha256 disagrees with the manifest or that holds objects."""
    root, entry = _locate(name, root)
    path = root / entry["file"]
    if not path.is_file():
        raise InputError(f"fixture {name!r}: file {path} is missing")
    actual = sha256_file(path)
    if actual != entry["sha256"]:
        raise InputError(f"fixture {name!r}: {path.name} has sha256 {actual[:16]}..., "
                         f"the manifest says {entry['sha256'][:16]}...")
    return _read_npz(path, name)


def fixture_entry(name: str) -> dict[str, Any] | None:
    """The manifest entry of fixture `name` (fixtures folders, then the --gguf cache), None if absent."""
    try:
        return _locate(name, None)[1]
    except InputError:
        return None


def list_fixtures(root: str | Path | None = None) -> list[dict[str, Any]]:
    """Manifest entries (with their name), sorted by name."""
    manifest = read_manifest(root)
    return [{"name": name, **entry} for name, entry in sorted(manifest["fixtures"].items())]


def verify_fixtures(root: str | Path | None = None) -> list[str]:
    """Every problem found (empty: all good) in `root`, or in the user's folder and the built-in set:
    sha256 of each file, loadability, re-dequantization, files the manifest does not list."""
    return [problem for folder in search_roots(root) for problem in _verify_folder(folder)]


def _verify_folder(root: Path) -> list[str]:
    manifest = _read_one_manifest(root)
    problems = []
    for name, entry in sorted(manifest["fixtures"].items()):
        try:
            fix = load_fixture(name, root)
        except InputError as exc:
            problems.append(str(exc))
            continue
        if (fix.fmt, fix.rows, fix.cols) != (entry["fmt"], entry["rows"], entry["cols"]):
            problems.append(f"fixture {name!r}: file says {fix.fmt} {fix.rows}x{fix.cols}, manifest "
                            f"{entry['fmt']} {entry['rows']}x{entry['cols']}")
        elif values_sha256(fix.fmt, fix.raw) != entry["values_sha256"]:
            problems.append(f"fixture {name!r}: dequantized values differ from those recorded "
                            f"(has the {fix.fmt} oracle changed?)")
    problems += _stale_gguf_sources(root, manifest)
    listed = {entry["file"] for entry in manifest["fixtures"].values()}
    for path in sorted(root.glob("*.npz")):
        if path.name not in listed:
            problems.append(f"{path.name} is not in {MANIFEST_NAME}")
    return problems


def _stale_gguf_sources(root: Path, manifest: dict[str, Any]) -> list[str]:
    """Fixtures taken from a GGUF file that sits in `root` (the committed rows file) must match it."""
    problems, shas = [], {}
    for name, entry in sorted(manifest["fixtures"].items()):
        prov = entry.get("provenance", {})
        source = root / str(prov.get("file", ""))
        if prov.get("kind") != "gguf" or not source.is_file():
            continue
        shas.setdefault(source, sha256_file(source))
        if shas[source] != prov.get("file_sha256"):
            problems.append(f"fixture {name!r}: {source.name} has changed since the fixture was taken from it")
    return problems
