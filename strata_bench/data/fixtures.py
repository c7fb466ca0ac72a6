"""Fixtures: raw quantized blocks + shape + format + provenance (+ seeded activations).

A fixture is stored as `<name>.npz` (read back with allow_pickle=False) and listed in
`manifest.json` beside it with the file's sha256 and a sha256 of its dequantized float32 values,
so `verify` catches both a changed file and a changed oracle. Every write goes to a temporary name
first and is renamed into place, so a failed write leaves nothing behind.

Synthetic weights are generated on the fly from (format, shape, seed, edge); kernel cases call
`synthetic_weights` at large shapes, so it is vectorized.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from strata_bench.errors import InputError
from strata_bench.formats import QuantFormat, all_formats, get_format

MANIFEST_NAME = "manifest.json"
MANIFEST_SCHEMA = 1
DEFAULT_GGUF_ROWS = 64  # rows taken from a GGUF tensor when no --rows is given
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# --- the record --------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Fixture:
    """Raw blocks (rows, bytes_per_row) uint8 of one format, with where they came from."""

    name: str
    fmt: str
    rows: int
    cols: int
    raw: np.ndarray
    provenance: dict[str, Any] = field(default_factory=dict)
    activations: np.ndarray | None = None  # float32 (n, cols), seeded, where a case needs them

    def __post_init__(self) -> None:
        check_name(self.name)
        expected = (self.rows, self.format.bytes_per_row(self.cols))
        if self.raw.dtype != np.uint8 or self.raw.shape != expected:
            raise InputError(f"fixture {self.name}: raw blocks are {self.raw.dtype}{self.raw.shape}, "
                             f"expected uint8{expected} for {self.fmt} {self.rows}x{self.cols}")
        if self.activations is not None and self.activations.dtype != np.float32:
            raise InputError(f"fixture {self.name}: activations are {self.activations.dtype}, not float32")

    @property
    def format(self) -> QuantFormat:
        return get_format(self.fmt)

    def values(self) -> np.ndarray:
        """float32 (rows, cols): the oracle's dequantization."""
        return self.format.dequantize(self.raw)

    def values_f64(self) -> np.ndarray:
        return self.format.dequantize_f64(self.raw)


def check_name(name: str) -> str:
    if not _NAME_RE.match(name or ""):
        raise InputError(f"bad fixture name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


# --- synthetic data ----------------------------------------------------------------------------
def synthetic_weights(fmt: str | QuantFormat, rows: int, cols: int, seed: int,
                      edge: bool = False) -> np.ndarray:
    """Seeded random blocks (rows, bytes_per_row) uint8; with `edge`, the edge-case blocks come first.

    The random blocks do not depend on `edge` (edge blocks come from their own stream and overwrite
    the first blocks), so an edge fixture differs from the plain one only at its start.
    """
    fmt = get_format(fmt) if isinstance(fmt, str) else fmt
    bytes_per_row = fmt.bytes_per_row(cols)
    if rows <= 0:
        raise InputError(f"row count {rows} must be positive")
    blocks = fmt.random_blocks(np.random.default_rng(seed), rows * (cols // fmt.block_size))
    if edge:
        special = fmt.edge_blocks(np.random.default_rng([seed, 0xED6E]))
        count = min(len(special), len(blocks))
        blocks[:count] = special[:count]
    return blocks.reshape(rows, bytes_per_row)


def seeded_activations(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """float32 standard-normal activations, the same for the same seed and shape."""
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def make_synthetic(fmt: str, rows: int, cols: int, seed: int, edge: bool = False,
                   name: str | None = None, activation_rows: int = 0) -> Fixture:
    """A synthetic fixture with its provenance recorded (what `fixtures make` saves)."""
    fmt = get_format(fmt).name
    name = name or f"{fmt}-{rows}x{cols}-s{seed}{'-edge' if edge else ''}"
    acts = seeded_activations(seed, (activation_rows, cols)) if activation_rows > 0 else None
    provenance = {"kind": "synthetic", "seed": seed, "generator": "strata_bench.data.fixtures.synthetic_weights",
                  "edge": edge}
    if acts is not None:
        provenance["activations"] = {"generator": "strata_bench.data.fixtures.seeded_activations", "seed": seed}
    return Fixture(name, fmt, rows, cols, synthetic_weights(fmt, rows, cols, seed, edge), provenance, acts)


# --- storage -----------------------------------------------------------------------------------
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
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def values_sha256(fmt: str, raw: np.ndarray) -> str:
    values = np.ascontiguousarray(get_format(fmt).dequantize(raw), dtype="<f4")
    return hashlib.sha256(values.tobytes()).hexdigest()


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


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An uncompressed .npz that np.load reads, with fixed zip timestamps so equal arrays give equal
    bytes (np.savez stamps the current time, which would change every sha256 on each regeneration)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as archive:
        for key, array in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def read_manifest(root: str | Path | None = None) -> dict[str, Any]:
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


def save_fixture(fix: Fixture, root: str | Path | None = None, force: bool = False) -> Path:
    """Write `<root>/<name>.npz` and its manifest entry; returns the .npz path.

    Saving identical content again is a no-op; replacing a fixture with other content needs `force`.
    """
    root = _root(root)
    manifest = read_manifest(root)
    final = root / f"{fix.name}.npz"
    arrays = {"raw": fix.raw, "meta": np.array(json.dumps(
        {"name": fix.name, "fmt": fix.fmt, "rows": fix.rows, "cols": fix.cols, "provenance": fix.provenance}))}
    if fix.activations is not None:
        arrays["activations"] = fix.activations
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


def _entry(manifest: dict[str, Any], name: str, root: Path) -> dict[str, Any]:
    try:
        return manifest["fixtures"][name]
    except KeyError:
        known = ", ".join(sorted(manifest["fixtures"])[:12]) or "none"
        raise InputError(f"no fixture named {name!r} in {root} (known: {known})") from None


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


# --- GGUF --------------------------------------------------------------------------------------
def parse_rows(text: str) -> tuple[int, int]:
    """'A:B' -> (A, B); the range must be non-empty and increasing."""
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text or "")
    if not match:
        raise InputError(f"bad row range {text!r}: expected A:B, e.g. 0:64")
    return _check_rows((int(match.group(1)), int(match.group(2))))


def _check_rows(rows: tuple[int, int]) -> tuple[int, int]:
    first, stop = rows
    if first < 0 or stop <= first:
        kind = "empty" if stop == first else "reversed"
        raise InputError(f"{kind} row range {first}:{stop}: need 0 <= A < B")
    return first, stop


def open_gguf(path: str | Path):
    """A GGUFReader, or InputError for a missing, non-GGUF, truncated or corrupt file."""
    from gguf import GGUFReader

    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such GGUF file: {path}")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != b"GGUF":
        raise InputError(f"{path} is not a GGUF file (starts with {magic!r}, expected b'GGUF')")
    try:
        reader = GGUFReader(path)
    except Exception as exc:  # gguf raises ValueError, IndexError, struct errors...: all mean corrupt
        raise InputError(f"{path} is truncated or corrupt: {type(exc).__name__}: {exc}".replace("\n", " ")) from None
    size = path.stat().st_size
    for tensor in reader.tensors:
        if tensor.data_offset + tensor.n_bytes > size:
            raise InputError(f"{path} is truncated: tensor {tensor.name} ends past the file's {size} bytes")
    return reader


def _has_format(tensor) -> bool:
    return any(f.qtype == tensor.tensor_type for f in all_formats().values())


def tensor_format(tensor) -> QuantFormat:
    """The format of a GGUFReader tensor, or InputError for types strata-bench does not know."""
    by_type = {f.qtype: f for f in all_formats().values() if f.qtype is not None}
    try:
        return by_type[tensor.tensor_type]
    except KeyError:
        raise InputError(f"tensor {tensor.name} has type {tensor.tensor_type.name}, "
                         f"not a quant format strata-bench knows") from None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-") or "tensor"


def fixture_from_gguf(path: str | Path, tensor_regex: str, rows: tuple[int, int] | None = None,
                      as_fmt: str | None = None, name: str | None = None) -> list[Fixture]:
    """Fixtures from rows of every tensor whose name matches `tensor_regex` (re.search).

    `rows` defaults to the first 64 rows (fewer if the tensor has fewer); `as_fmt` re-quantizes the
    rows (dequantized by gguf-py) with a Python quantizer, where the target format has one.
    """
    path = Path(path)
    try:
        pattern = re.compile(tensor_regex)
    except re.error as exc:
        raise InputError(f"bad tensor regex {tensor_regex!r}: {exc}") from None
    if rows is not None:
        rows = _check_rows(rows)
    target = get_format(as_fmt) if as_fmt else None
    if target is not None and not target.can_quantize():
        raise InputError(f"cannot re-quantize to {target.name}: gguf-py has no quantizer for it "
                         "(real i-quant and K-quant rows come from `strata-bench fixtures requantize`)")
    reader = open_gguf(path)
    tensors = [t for t in reader.tensors if pattern.search(t.name)]
    if not tensors:
        names = ", ".join(t.name for t in reader.tensors[:8])
        raise InputError(f"no tensor matches {tensor_regex!r} in {path.name} (tensors: {names}, ...)")
    known = [t for t in tensors if _has_format(t)]
    if len(tensors) > 1 and known:
        tensors = known  # a broad regex takes the quantized tensors and leaves norms and the like
    if name is not None and len(tensors) > 1:
        raise InputError(f"--name needs a --tensor regex matching one tensor; {tensor_regex!r} matched {len(tensors)}")
    file_sha = sha256_file(path)
    return [_tensor_fixture(path, file_sha, t, rows, target, name) for t in tensors]


def _tensor_fixture(path: Path, file_sha: str, tensor, rows, target, name) -> Fixture:
    source = tensor_format(tensor)
    cols = int(tensor.shape[0])  # ggml order: ne0 is the row length
    data = np.asarray(tensor.data).reshape(-1, source.bytes_per_row(cols))
    first, stop = rows if rows is not None else (0, min(DEFAULT_GGUF_ROWS, data.shape[0]))
    if stop > data.shape[0]:
        raise InputError(f"row range {first}:{stop} is past the end of {tensor.name} ({data.shape[0]} rows)")
    raw = np.array(data[first:stop], dtype=np.uint8)
    provenance = {"kind": "gguf", "file": path.name, "file_sha256": file_sha, "tensor": tensor.name,
                  "rows": [first, stop], "type": source.name}
    fmt = source
    if target is not None:
        if cols % target.block_size:
            raise InputError(f"cannot re-quantize {tensor.name} to {target.name}: row length {cols} "
                             f"is not a multiple of {target.block_size}")
        raw = target.quantize(source.dequantize(raw))
        fmt, provenance["requantized_as"] = target, target.name
    suffix = f"-as-{target.name}" if target is not None else ""
    name = name or f"{_slug(path.stem)}-{_slug(tensor.name)}-r{first}-{stop}{suffix}"
    return Fixture(name, fmt.name, stop - first, cols, raw, provenance)
