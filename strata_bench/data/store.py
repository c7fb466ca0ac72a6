"""The fixture store: `<root>/<name>.npz` files listed in `<root>/manifest.json`.

Each manifest entry holds the file's sha256 and a sha256 of its dequantized float32 values, so
`verify_fixtures` catches both a changed file and a changed oracle. Files are read back with
allow_pickle=False. Every write goes to a temporary name first and is renamed into place, so a failed
write leaves nothing behind.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
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
def default_root() -> Path:
    """$STRATA_FIXTURES, else the checkout's fixtures/ (committed real-weight set), else ./fixtures."""
    if os.environ.get("STRATA_FIXTURES"):
        return Path(os.environ["STRATA_FIXTURES"])
    from strata_bench.kernels.sources import REPO_ROOT

    repo = REPO_ROOT / "fixtures"
    return repo if repo.is_dir() else Path("fixtures")


def _root(root: str | Path | None) -> Path:
    return Path(root) if root is not None else default_root()


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


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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


# --- the manifest ------------------------------------------------------------------------------
def read_manifest(root: str | Path | None = None) -> dict[str, Any]:
    """The manifest of `root` (an empty one where there is none); InputError when it is corrupt."""
    path = _root(root) / MANIFEST_NAME
    if not path.exists():
        return {"schema": MANIFEST_SCHEMA, "fixtures": {}}
    try:
        manifest = json.loads(path.read_text())
        if not isinstance(manifest.get("fixtures"), dict):
            raise ValueError("no 'fixtures' table")
    except (ValueError, AttributeError) as exc:
        raise InputError(f"corrupt fixture manifest {path}: {exc}") from None
    return manifest


def _write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    manifest["fixtures"] = dict(sorted(manifest["fixtures"].items()))
    with atomic_path(root / MANIFEST_NAME) as tmp:
        tmp.write_text(json.dumps(manifest, indent=1) + "\n")


def _manifest_entry(fix: Fixture, file_sha: str) -> dict[str, Any]:
    return {"file": f"{fix.name}.npz", "sha256": file_sha, "values_sha256": values_sha256(fix.fmt, fix.raw),
            "fmt": fix.fmt, "rows": fix.rows, "cols": fix.cols, "provenance": fix.provenance,
            "activations": None if fix.activations is None else list(fix.activations.shape)}


def _entry(manifest: dict[str, Any], name: str, root: Path) -> dict[str, Any]:
    try:
        return manifest["fixtures"][name]
    except KeyError:
        known = ", ".join(sorted(manifest["fixtures"])[:12]) or "none"
        raise InputError(f"no fixture named {name!r} in {root} (known: {known})") from None


# --- save, load, list, verify ------------------------------------------------------------------
def save_fixture(fix: Fixture, root: str | Path | None = None, force: bool = False) -> Path:
    """Write `<root>/<name>.npz` and its manifest entry; returns the .npz path.

    Saving identical content again is a no-op; replacing a fixture with other content needs `force`.
    """
    root = _root(root)
    manifest = read_manifest(root)
    final = root / f"{fix.name}.npz"
    arrays = _fixture_arrays(fix)
    with atomic_path(final) as tmp:
        write_npz(tmp, arrays)
        entry = _manifest_entry(fix, sha256_file(tmp))
        old = manifest["fixtures"].get(fix.name)
        if old is not None and not force and old.get("values_sha256") != entry["values_sha256"]:
            raise InputError(f"fixture {fix.name!r} already exists in {root} with other values "
                             "(choose another --name or pass --force)")
    # The manifest is written after the .npz is in place, so it never names a file that is not there.
    manifest["fixtures"][fix.name] = entry
    _write_manifest(root, manifest)
    return final


def load_fixture(name: str, root: str | Path | None = None) -> Fixture:
    """Load a fixture, refusing a file whose sha256 disagrees with the manifest or that holds objects."""
    root = _root(root)
    entry = _entry(read_manifest(root), name, root)
    path = root / entry["file"]
    if not path.is_file():
        raise InputError(f"fixture {name!r}: file {path} is missing")
    actual = sha256_file(path)
    if actual != entry["sha256"]:
        raise InputError(f"fixture {name!r}: {path.name} has sha256 {actual[:16]}..., "
                         f"the manifest says {entry['sha256'][:16]}...")
    return _read_npz(path, name)


def list_fixtures(root: str | Path | None = None) -> list[dict[str, Any]]:
    """Manifest entries (with their name), sorted by name."""
    manifest = read_manifest(root)
    return [{"name": name, **entry} for name, entry in sorted(manifest["fixtures"].items())]


def verify_fixtures(root: str | Path | None = None) -> list[str]:
    """Every problem found (empty: all good): sha256 of each file, loadability, re-dequantization."""
    root = _root(root)
    manifest = read_manifest(root)
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
