"""GGUF structure validation: each check on a hand-made file, and an in-process fuzz of the committed
rows file through the function `fixtures from-gguf` calls. Every mutant must either be refused with an
InputError or be structurally valid as an independent parse (gguf-py's GGUFReader) sees it, with the
imported bytes equal to the bytes at that parse's offsets."""
from __future__ import annotations

import struct
from collections import Counter

import numpy as np
import pytest

from strata_bench.data.gguf_import import fixture_from_gguf
from strata_bench.data.gguf_layout import read_layout, type_sizes
from strata_bench.errors import InputError
from strata_bench.kernels.sources import REPO_ROOT

ROWS_GGUF = REPO_ROOT / "fixtures" / "smollm2-rows.gguf"


def _string(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


def make_gguf(tensors, version=3, alignment=None, data_size=None) -> bytes:
    """A GGUF file: tensors are (name, shape, type id, relative offset); data is zero bytes."""
    kv = b""
    if alignment is not None:
        kv = _string("general.alignment") + struct.pack("<II", 4, alignment)
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), 1 if alignment is not None else 0) + kv
    for name, shape, type_id, offset in tensors:
        head += _string(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
        head += struct.pack("<IQ", type_id, offset)
    align = alignment or 32
    head += b"\0" * (-len(head) % align)
    return head + b"\0" * (data_size if data_size is not None else 4096)


Q8_0 = 8  # 32 values in 34 bytes


@pytest.mark.parametrize("tensors,kwargs,problem", [
    ([("a", (32, 2), Q8_0, 0)], {"version": 1}, "is corrupt: GGUF version 1 (this reader knows 2, 3)"),
    ([("a", (32, 0), Q8_0, 0)], {}, "is corrupt: tensor 'a' has a zero dimension (shape [32, 0])"),
    ([("a", (32, 2), 99, 0)], {}, "is corrupt: tensor 'a' has unknown type id 99"),
    ([("a", (33, 2), Q8_0, 0)], {}, "is corrupt: tensor 'a': row length 33 is not a multiple of its type's block of 32"),
    ([("a", (32, 2), Q8_0, 8)], {}, "is corrupt: tensor 'a': offset 8 is not aligned to 32"),
    ([("a", (32, 2), Q8_0, 0), ("b", (32, 2), Q8_0, 64)], {}, "is corrupt: tensors 'a' and 'b' overlap"),
    ([("a", (32, 2), Q8_0, 0), ("a", (32, 2), Q8_0, 96)], {}, "is corrupt: tensor name 'a' appears twice"),
    ([("a", (32, 2), Q8_0, 0)], {"alignment": 24}, "is corrupt: general.alignment 24 is not a power of two"),
    ([("a", (32, 200), Q8_0, 0)], {}, "is truncated: tensor a ends past the file's "),
    ([("a", (32, 1, 1, 1, 1), Q8_0, 0)], {}, "is corrupt: tensor 'a' has 5 dimensions (1 to 4 allowed)"),
])
def test_each_structural_check(tmp_path, tensors, kwargs, problem):
    path = tmp_path / "t.gguf"
    path.write_bytes(make_gguf(tensors, **kwargs))
    with pytest.raises(InputError) as info:
        read_layout(path)
    assert str(info.value).startswith(f"{path} {problem}")


def test_valid_file_and_upstream_q2_0_type_42(tmp_path):
    path = tmp_path / "t.gguf"
    path.write_bytes(make_gguf([("a", (32, 2), Q8_0, 0), ("q", (64, 3), 42, 96)], alignment=32))
    layout = read_layout(path)
    assert [(t.name, t.type_id, t.shape, t.n_bytes, t.n_rows) for t in layout.tensors] == [
        ("a", 8, (32, 2), 68, 2), ("q", 42, (64, 3), 54, 3)]
    assert type_sizes()[42] == (64, 18)
    (fix,) = fixture_from_gguf(path, "^q$")
    assert fix.fmt == "q2_0_ggml" and fix.raw.shape == (3, 18)  # type 42 is upstream's, never the engine's q2_0


def test_committed_file_matches_gguf_py():
    from gguf import GGUFReader

    reader, layout = GGUFReader(ROWS_GGUF), read_layout(ROWS_GGUF)
    assert [(t.name, int(t.tensor_type), tuple(int(d) for d in t.shape), int(t.data_offset), int(t.n_bytes))
            for t in reader.tensors] == [(t.name, t.type_id, t.shape, t.offset, t.n_bytes) for t in layout.tensors]


# --- fuzz ----------------------------------------------------------------------------------------
BOUNDARY = [0, 1, 2, 3, 31, 32, 33, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1]


def _mutants(data: bytes, header_end: int, count: int, rng: np.random.Generator):
    """Byte and bit flips, boundary integers, truncations, insertions and deletions in the header and
    tensor-info table (where structure lives), a few in the data section."""
    for index in range(count):
        kind = ("byte", "bit", "int", "truncate", "insert", "delete")[index % 6]
        buf = bytearray(data)
        pos = int(rng.integers(0, header_end))
        if kind == "byte":
            buf[pos] = int(rng.integers(0, 256))
        elif kind == "bit":
            buf[pos] ^= 1 << int(rng.integers(0, 8))
        elif kind == "int":
            width = int(rng.choice([4, 8]))
            value = int(rng.choice(BOUNDARY)) % (1 << (8 * width))
            buf[pos:pos + width] = value.to_bytes(width, "little")
        elif kind == "truncate":
            buf = buf[:int(rng.integers(0, len(data)))]
        elif kind == "insert":
            buf[pos:pos] = bytes(rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8))
        else:
            del buf[pos:pos + int(rng.integers(1, 9))]
        yield kind, bytes(buf)


def _independent_check(path, fixtures) -> str | None:
    """None when gguf-py's own parse agrees the accepted file is structurally valid and the imported
    bytes are the bytes at its offsets; else what is wrong."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(path)
    except Exception as exc:  # noqa: BLE001 - any failure of the independent parse is a finding
        return f"gguf-py cannot parse it: {type(exc).__name__}"
    size, sizes, spans = path.stat().st_size, type_sizes(), []
    by_name = {t.name: t for t in reader.tensors}
    for t in reader.tensors:
        shape = [int(d) for d in t.shape]
        if int(t.tensor_type) not in sizes or 0 in shape:
            return f"{t.name}: type {int(t.tensor_type)} shape {shape}"
        block, type_size = sizes[int(t.tensor_type)]
        if shape[0] % block or int(t.n_bytes) != int(np.prod(shape)) // block * type_size:
            return f"{t.name}: byte size"
        if (int(t.data_offset) - reader.data_offset) % reader.alignment or int(t.data_offset) + int(t.n_bytes) > size:
            return f"{t.name}: offset"
        spans.append((int(t.data_offset), int(t.data_offset) + int(t.n_bytes)))
    spans.sort()
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
        return "overlap"
    raw = path.read_bytes()
    for fix in fixtures:
        t = by_name[fix.provenance["tensor"]]
        expect = raw[int(t.data_offset):int(t.data_offset) + fix.raw.nbytes]
        if fix.raw.tobytes() != expect:
            return f"{t.name}: imported bytes differ"
    return None


FUZZ_MUTANTS = 2400  # about 28 s on 2 idle cores: the test is bounded by this count, never by its seconds


@pytest.mark.slow
def test_fuzz_from_gguf_never_crashes_and_never_accepts_an_invalid_file(tmp_path):
    data = ROWS_GGUF.read_bytes()
    header_end = read_layout(ROWS_GGUF).tensors[0].offset
    rng = np.random.default_rng(20261201)
    outcomes, findings = Counter(), []
    path = tmp_path / "m.gguf"
    for kind, mutant in _mutants(data, header_end, FUZZ_MUTANTS, rng):
        path.write_bytes(mutant)
        try:
            fixtures = fixture_from_gguf(path, ".")
        except InputError:
            outcomes["refused (InputError)"] += 1
            continue
        except Exception as exc:  # noqa: BLE001 - a traceback of the CLI; the test fails on any
            outcomes["traceback"] += 1
            findings.append(f"{kind}: {type(exc).__name__}: {exc}")
            continue
        problem = _independent_check(path, fixtures)
        outcomes["accepted, valid" if problem is None else "accepted, INVALID"] += 1
        if problem is not None:
            findings.append(f"{kind}: {problem}")
    print(f"\nfuzz: {sum(outcomes.values())} mutants: {dict(outcomes)}")
    assert sum(outcomes.values()) == FUZZ_MUTANTS  # every mutant tried, each with one outcome
    assert not findings, findings[:10]
