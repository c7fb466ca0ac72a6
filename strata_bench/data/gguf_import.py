"""GGUF import: rows of a GGUF file's quantized tensors as fixtures, with the file, its sha256, the
tensor and the rows recorded. A missing, foreign, truncated or corrupt file is an InputError."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from strata_bench.data.fixture import Fixture
from strata_bench.data.store import sha256_file
from strata_bench.errors import InputError
from strata_bench.formats import QuantFormat, all_formats, get_format

DEFAULT_GGUF_ROWS = 64  # rows taken from a GGUF tensor when no --rows is given


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
