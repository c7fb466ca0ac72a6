"""GGUF structure, parsed and validated before any tensor data is used.

gguf-py's GGUFReader trusts the file (a zero dimension divides by zero, an unaligned or overlapping
offset is read as given) and cannot parse type 42 (upstream ggml's Q2_0), so the import reads the header,
the key/value table and the tensor-info table itself and checks: the magic and version; every count
within what the remaining bytes can hold; every key, string and array inside the file; every tensor's
type known (a ggml type gguf-py lists, or 42), at most 4 dimensions, each non-zero, a row length that is
a whole number of blocks, a byte size from its type; every offset aligned to the file's alignment, inside
the file, and no two tensors overlapping. Any failure is one InputError naming the file and the problem.
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from strata_bench.errors import InputError

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # version 1 had 32-bit counts and is not written by any current tool
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ARRAY_DEPTH = 4
DEFAULT_ALIGNMENT = 32
UPSTREAM_Q2_0 = 42  # upstream ggml's Q2_0: 64 values in 18 bytes; gguf-py 0.19 does not list it

# value type -> struct code of the fixed-size GGUF scalar types (8 = string, 9 = array)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_MIN_KV = 8 + 4 + 1  # key length, value type, one byte of value
_MIN_TENSOR_INFO = 8 + 4 + 8 + 4 + 8  # name length, n_dims, one dimension, type, offset


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a validated GGUF file. `shape` is in ggml order: shape[0] is the row length."""

    name: str
    type_id: int
    shape: tuple[int, ...]
    offset: int  # absolute, from the start of the file
    n_bytes: int
    block_size: int

    @property
    def n_rows(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) if len(self.shape) > 1 else 1


@dataclass(frozen=True)
class GgufLayout:
    """A GGUF file's structure: version, alignment, scalar and string values by key, tensors in file order."""

    path: Path
    version: int
    alignment: int
    fields: dict[str, Any]
    tensors: tuple[TensorInfo, ...]

    def read(self, tensor: TensorInfo) -> np.ndarray:
        """The tensor's bytes as (rows, bytes per row) uint8, read from the file (a validated range)."""
        with open(self.path, "rb") as fh:
            fh.seek(tensor.offset)
            data = np.frombuffer(fh.read(tensor.n_bytes), dtype=np.uint8)
        if data.size != tensor.n_bytes:
            raise InputError(f"{self.path} is truncated: tensor {tensor.name} was cut while reading")
        return data.reshape(tensor.n_rows, tensor.n_bytes // tensor.n_rows)


def type_sizes() -> dict[int, tuple[int, int]]:
    """GGUF type id -> (values per block, bytes per block) for every type this build can size."""
    from gguf.constants import GGML_QUANT_SIZES

    sizes = {int(t): (int(b), int(n)) for t, (b, n) in GGML_QUANT_SIZES.items()}
    sizes.setdefault(UPSTREAM_Q2_0, (64, 18))
    return sizes


class _Cursor:
    """Little-endian reads from the file's bytes; running past the end is 'truncated'."""

    def __init__(self, data: bytes, path: Path):
        self.data, self.pos, self.path = data, 0, path

    def fail(self, problem: str) -> InputError:
        return InputError(f"{self.path} is corrupt: {problem}")

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or n > self.remaining():
            raise InputError(f"{self.path} is truncated: {what} at byte {self.pos} needs {n} bytes, "
                             f"{self.remaining()} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def scalar(self, code: str, what: str):
        return struct.unpack("<" + code, self.take(struct.calcsize(code), what))[0]

    def string(self, what: str) -> str:
        raw = self.take(self.scalar("Q", f"{what} length"), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} at byte {self.pos - len(raw)} is not UTF-8") from None

    def value(self, vtype: int, what: str, depth: int = 0) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype != _ARRAY:
            raise self.fail(f"{what} has unknown value type {vtype}")
        if depth >= MAX_ARRAY_DEPTH:
            raise self.fail(f"{what} nests arrays deeper than {MAX_ARRAY_DEPTH}")
        item, count = self.scalar("I", f"{what} item type"), self.scalar("Q", f"{what} count")
        if item in _SCALARS:
            self.take(count * struct.calcsize(_SCALARS[item]), f"{what} items")  # skipped: not used
            return None
        if count > self.remaining() // 8:  # every string or array item takes at least 8 bytes
            raise InputError(f"{self.path} is truncated: {what} claims {count} items, more than the file holds")
        for _ in range(count):
            self.value(item, f"{what} item", depth + 1)
        return None


def read_layout(path: str | Path) -> GgufLayout:
    """Parse and validate a GGUF file's structure; InputError for a missing, foreign, cut or corrupt file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such GGUF file: {path}")
    with open(path, "rb") as fh:
        if fh.read(4) != MAGIC:
            fh.seek(0)
            raise InputError(f"{path} is not a GGUF file (starts with {fh.read(4)!r}, expected b'GGUF')")
        # A mapped view: a model file of many GB is parsed without reading its tensor data.
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _parse(_Cursor(data, path), path, len(data))


def _parse(cur: _Cursor, path: Path, size: int) -> GgufLayout:
    cur.take(4, "magic")
    version = cur.scalar("I", "version")
    if version not in VERSIONS:
        raise cur.fail(f"GGUF version {version} (this reader knows {', '.join(map(str, VERSIONS))})")
    n_tensors, n_kv = cur.scalar("Q", "tensor count"), cur.scalar("Q", "key/value count")
    if n_kv > cur.remaining() // _MIN_KV or n_tensors > cur.remaining() // _MIN_TENSOR_INFO:
        raise InputError(f"{path} is truncated: {n_tensors} tensors and {n_kv} keys cannot fit in {size} bytes")
    fields = _read_fields(cur, n_kv)
    alignment = fields.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
        raise cur.fail(f"general.alignment {alignment!r} is not a power of two")
    infos = [_read_tensor_info(cur, i) for i in range(n_tensors)]
    start = -(-cur.pos // alignment) * alignment
    tensors = tuple(_check_tensor(cur, info, start, alignment) for info in infos)
    _check_no_overlap(cur, tensors)
    return GgufLayout(path, version, alignment, fields, tensors)


def _read_fields(cur: _Cursor, n_kv: int) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for index in range(n_kv):
        key = cur.string(f"key {index}")
        if key in fields:
            raise cur.fail(f"key {key!r} appears twice")
        fields[key] = cur.value(cur.scalar("I", f"value type of {key!r}"), f"value of {key!r}")
    return fields


def _read_tensor_info(cur: _Cursor, index: int) -> tuple[str, tuple[int, ...], int, int]:
    name = cur.string(f"name of tensor {index}")
    n_dims = cur.scalar("I", f"dimension count of {name!r}")
    if not 1 <= n_dims <= MAX_DIMS:
        raise cur.fail(f"tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
    shape = tuple(cur.scalar("Q", f"dimension of {name!r}") for _ in range(n_dims))
    return name, shape, cur.scalar("I", f"type of {name!r}"), cur.scalar("Q", f"offset of {name!r}")


def _check_tensor(cur: _Cursor, info: tuple[str, tuple[int, ...], int, int], start: int,
                  alignment: int) -> TensorInfo:
    name, shape, type_id, offset = info
    sizes = type_sizes()
    if type_id not in sizes:
        raise cur.fail(f"tensor {name!r} has unknown type id {type_id}")
    if 0 in shape:
        raise cur.fail(f"tensor {name!r} has a zero dimension (shape {list(shape)})")
    block, type_size = sizes[type_id]
    if shape[0] % block:
        raise cur.fail(f"tensor {name!r}: row length {shape[0]} is not a multiple of its type's block of {block}")
    n_values = 1
    for dim in shape:
        n_values *= dim
    n_bytes = n_values // block * type_size
    if offset % alignment:
        raise cur.fail(f"tensor {name!r}: offset {offset} is not aligned to {alignment}")
    if start + offset + n_bytes > len(cur.data):
        raise InputError(f"{cur.path} is truncated: tensor {name} ends past the file's {len(cur.data)} bytes")
    return TensorInfo(name, type_id, shape, start + offset, n_bytes, block)


def _check_no_overlap(cur: _Cursor, tensors: tuple[TensorInfo, ...]) -> None:
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise cur.fail(f"tensor name {dup!r} appears twice")
    ordered = sorted(tensors, key=lambda t: t.offset)
    for before, after in zip(ordered, ordered[1:]):
        if before.offset + before.n_bytes > after.offset:
            raise cur.fail(f"tensors {before.name!r} and {after.name!r} overlap")
