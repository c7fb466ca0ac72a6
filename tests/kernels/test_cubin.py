"""kernels/cubin.py: architecture, kernel symbols and parameter tables read from a cubin's ELF, and a
fatbin's entries (the committed files in tests/kernels/data were built by nvcc 13.0 from params.cu)."""
from __future__ import annotations

import struct
import threading
from pathlib import Path

import pytest

from strata_bench.kernels import cubin
from strata_bench.kernels.cubin import CubinError, Param

DATA = Path(__file__).parent / "data"
MATVEC_16_1 = "_Z6matvecILN3eng5qtypeE16ELi1EEvPKvPKfNS0_6fusionEPf5uint3ix"


def test_kernels_and_parameter_tables():
    image = cubin.read_elf((DATA / "params_sm90.cubin").read_bytes())
    assert image.arch == 90
    assert sorted(image.kernels) == ["_Z5plainPfcsd", MATVEC_16_1,
                                     "_Z6matvecILN3eng5qtypeE16ELi2EEvPKvPKfNS0_6fusionEPf5uint3ix",
                                     "_Z6matvecILN3eng5qtypeE20ELi1EEvPKvPKfNS0_6fusionEPf5uint3ix"]
    matvec = image.kernels[MATVEC_16_1]
    # const void*, const float*, a 24-byte struct (2 pointers, int, float), float*, uint3, int, long long
    assert [(p.offset, p.size) for p in matvec.params] == [(0, 8), (8, 8), (16, 24), (40, 8), (48, 12), (60, 4),
                                                           (64, 8)]
    assert [p.ordinal for p in matvec.params] == list(range(7))
    assert matvec.param_bytes == 72 and matvec.local  # a static kernel: a LOCAL symbol
    plain = image.kernels["_Z5plainPfcsd"]
    assert plain.params == (Param(0, 0, 8), Param(1, 8, 1), Param(2, 10, 2), Param(3, 16, 8)) and not plain.local


def test_fatbin_entries_and_arch_selection():
    data = (DATA / "params.fatbin").read_bytes()
    assert [arch for arch, _ in cubin.fatbin_elves(data)] == [80, 90]
    sm80 = cubin.elf_for_arch(data, 80, "params.fatbin")
    assert cubin.read_elf(sm80).arch == 80 and MATVEC_16_1 in cubin.read_elf(sm80).kernels
    with pytest.raises(CubinError) as err:
        cubin.elf_for_arch(data, 86, "params.fatbin")
    assert str(err.value) == "params.fatbin: a fatbin without an sm_86 cubin (it has: sm_80, sm_90)"


def test_a_cubin_for_another_arch_is_one_line():
    data = (DATA / "params_sm90.cubin").read_bytes()
    assert cubin.elf_for_arch(data, 90, "k.cubin") is data
    with pytest.raises(CubinError) as err:
        cubin.elf_for_arch(data, 80, "k.cubin")
    assert str(err.value) == "k.cubin: a cubin for sm_90, not sm_80"


def test_a_compressed_fatbin_entry_is_refused_with_its_reason():
    data = bytearray((DATA / "params.fatbin").read_bytes())
    # The first entry's flags (at 40 in its 64-byte header, after the 16-byte fatbin header) say compressed.
    flags = int.from_bytes(data[16 + 40:16 + 48], "little") | 0x2000
    data[16 + 40:16 + 48] = flags.to_bytes(8, "little")
    with pytest.raises(CubinError, match=r"^f: its sm_80 entry is compressed \(rebuild the fatbin with "):
        cubin.elf_for_arch(bytes(data), 80, "f")


@pytest.mark.parametrize("data,line", [
    (b"hello world, not a binary", "x: neither a cubin (ELF) nor a fatbin"),
    (b"\x7fELF\x01\x01" + bytes(60), "not a 64-bit little-endian ELF file (a cubin is one)"),
])
def test_not_a_cubin(data, line):
    with pytest.raises(CubinError) as err:
        cubin.read_elf(cubin.elf_for_arch(data, 90, "x")) if data[:4] != b"\x7fELF" else cubin.read_elf(data)
    assert str(err.value) == line


def _fatbin(*entries: bytes) -> bytes:
    """A fatbin container (16-byte header) around `entries`."""
    body = b"".join(entries)
    return struct.pack("<IHHQ", cubin.FATBIN_MAGIC, 1, 16, len(body)) + body


def _entry(kind: int, head: int, size: int, arch: int = 90) -> bytes:
    """A 64-byte fatbin entry header: kind, version, header size, body size, arch at 28."""
    header = bytearray(struct.pack("<HHIQ", kind, 1, head, size) + bytes(48))
    header[28:32] = arch.to_bytes(4, "little")
    return bytes(header)


@pytest.mark.parametrize("data,line", [
    # 80 bytes: an ELF entry of header and size 0 was listed again and again (memory without end), a
    # PTX one (kind 1) read again for ever.
    (_fatbin(_entry(2, 0, 0)), "f: corrupt fatbin: the entry at byte 16 has a header of 0 bytes (at least 64)"),
    (_fatbin(_entry(1, 0, 0)), "f: corrupt fatbin: the entry at byte 16 has a header of 0 bytes (at least 64)"),
    (_fatbin(_entry(2, 64, 1000)), "f: corrupt fatbin: the entry at byte 16 (64 + 1000 bytes) runs past the end "
                                   "of the fatbin at byte 80"),
    (struct.pack("<IHHQ", cubin.FATBIN_MAGIC, 1, 0, 64) + _entry(2, 64, 0),
     "f: corrupt fatbin: header size 0 (at least 16)"),
])
def test_a_fatbin_entry_that_would_not_advance_is_refused(data, line):
    outcome: list = []

    def select() -> None:
        try:
            cubin.elf_for_arch(data, 90, "f")
        except CubinError as exc:
            outcome.append(str(exc))

    # A daemon thread with a bound: on a reader that loops, this test fails instead of hanging.
    worker = threading.Thread(target=select, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert outcome == [line]


def test_a_symbol_table_naming_a_missing_string_section_is_one_line():
    data = bytearray((DATA / "params_sm90.cubin").read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, count = struct.unpack_from("<HH", data, 0x3A)
    symtab = next(shoff + i * entsize for i in range(count)
                  if struct.unpack_from("<I", data, shoff + i * entsize + 4)[0] == 2)
    struct.pack_into("<I", data, symtab + 40, 999)  # sh_link: the section of the symbol names
    with pytest.raises(CubinError) as err, cubin.named("k.cubin"):
        cubin.read_elf(bytes(data))
    assert str(err.value) == f"k.cubin: corrupt ELF: the symbol table's strings are in section 999, of {count}"


@pytest.mark.parametrize("data,line", [
    (b"\x7fELF", "k.cubin: truncated ELF"),  # elf_arch read past the end
    (b"\x7fELF\x02\x01" + bytes(4), "k.cubin: truncated ELF"),
])
def test_a_cut_cubin_names_the_file(data, line):
    with pytest.raises(CubinError) as err:
        cubin.elf_for_arch(data, 90, "k.cubin")
    assert str(err.value) == line
