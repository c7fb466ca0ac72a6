"""GGUF import: rows of a GGUF file's quantized tensors as fixtures, with the file, its sha256, the
tensor and the rows recorded. A missing, foreign, truncated or corrupt file is an InputError."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from strata_bench.data.fixture import Fixture
from strata_bench.data.store import sha256_file
from strata_bench.errors import InputError
from strata_bench.data.gguf_layout import GgufLayout, TensorInfo, read_layout
from strata_bench.formats import QuantFormat, get_format
from strata_bench.formats.gguf_types import format_for_gguf_type, formats_by_gguf_type

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


def open_gguf(path: str | Path) -> GgufLayout:
    """The validated structure of a GGUF file (gguf_layout), or InputError for a missing, non-GGUF,
    truncated or corrupt one; no tensor data is read until every check has passed."""
    return read_layout(path)


def _has_format(tensor: TensorInfo) -> bool:
    return tensor.type_id in formats_by_gguf_type()


def tensor_format(tensor: TensorInfo) -> QuantFormat:
    """The format a GGUF tensor is read as (type 42 is upstream's q2_0_ggml, never the engine's q2_0),
    or InputError for types strata-bench does not know."""
    try:
        return format_for_gguf_type(tensor.type_id)
    except InputError:
        raise InputError(f"tensor {tensor.name} has GGUF type {_type_name(tensor.type_id)}, "
                         "not a quant format strata-bench knows") from None


def _type_name(type_id: int) -> str:
    from gguf import GGMLQuantizationType

    try:
        return GGMLQuantizationType(type_id).name
    except ValueError:
        return str(type_id)


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
    except (re.error, OverflowError) as exc:  # OverflowError: a repetition count past what re can hold
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
    for tensor in tensors:  # every tensor is checked before any is read, so a failure writes nothing
        _check_request(tensor, rows, target)
    file_sha = sha256_file(path)
    return [_tensor_fixture(reader, file_sha, t, rows, target, name) for t in tensors]


def _check_request(tensor: TensorInfo, rows: tuple[int, int] | None, target: QuantFormat | None) -> None:
    tensor_format(tensor)
    if rows is not None and rows[1] > tensor.n_rows:
        raise InputError(f"row range {rows[0]}:{rows[1]} is past the end of {tensor.name} ({tensor.n_rows} rows)")
    if target is not None and tensor.shape[0] % target.block_size:
        raise InputError(f"cannot re-quantize {tensor.name} to {target.name}: row length {tensor.shape[0]} "
                         f"is not a multiple of {target.block_size}")


def _tensor_fixture(reader: GgufLayout, file_sha: str, tensor: TensorInfo, rows, target, name) -> Fixture:
    path = reader.path
    source = tensor_format(tensor)
    cols = int(tensor.shape[0])  # ggml order: ne0 is the row length
    first, stop = rows if rows is not None else (0, min(DEFAULT_GGUF_ROWS, tensor.n_rows))
    data = reader.read(tensor)
    raw = np.array(data[first:stop], dtype=np.uint8)
    provenance = {"kind": "gguf", "file": path.name, "file_sha256": file_sha, "tensor": tensor.name,
                  "rows": [first, stop], "type": source.name}
    fmt = source
    if target is not None:
        raw = target.quantize(source.dequantize(raw))
        fmt, provenance["requantized_as"] = target, target.name
    suffix = f"-as-{target.name}" if target is not None else ""
    name = name or f"{_slug(path.stem)}-{_slug(tensor.name)}-r{first}-{stop}{suffix}"
    return Fixture(name, fmt.name, stop - first, cols, raw, provenance)
