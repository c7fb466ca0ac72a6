"""kernels/cubin.py: architecture, kernel symbols and parameter tables read from a cubin's ELF, and a
fatbin's entries (the committed files in tests/kernels/data were built by nvcc 13.0 from params.cu)."""
from __future__ import annotations

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
