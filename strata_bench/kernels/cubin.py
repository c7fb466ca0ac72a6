"""What a cubin says about its kernels, read on the CPU: its target architecture, its kernel symbols
and each kernel's parameter table (count, offsets, sizes), from the ELF alone.

Why our own ELF reader: cuobjdump and nvdisasm come with a full CUDA toolkit only (this project's CPU
hosts often have nvcc's compiler parts without them), and the facts needed here are plain ELF: the
symbol table (.symtab: a kernel is a FUNC symbol whose st_other has STO_CUDA_ENTRY) and the per-kernel
`.nv.info.<symbol>` section, whose EIATTR_KPARAM_INFO records are what `cuobjdump -elf` prints as
"Ordinal / Offset / Size". A fatbin (nvcc -fatbin) is a container of such ELF images, one per
architecture; its uncompressed ELF entries are read, a compressed one is refused with its reason.
"""
from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass
from typing import Iterator

from strata_bench.errors import InputError

ELF_MAGIC = b"\x7fELF"
FATBIN_MAGIC = 0xBA55ED50
_STO_CUDA_ENTRY = 0x10  # st_other bit of a __global__ function
_STT_FUNC = 2
# .nv.info attribute records: (format, attribute id, ...); format 4 carries a 16-bit size then a payload.
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_EIATTR_KPARAM_INFO = 0x17
_EIATTR_CBANK_PARAM_SIZE = 0x19
_FATBIN_ELF = 2
_FATBIN_HEADER = 16  # magic, version, header size, then the size of the entries that follow
_FATBIN_ENTRY_HEADER = 64  # kind, version, header size, body size, ..., arch at 28, flags at 40
_FATBIN_COMPRESSED = 0x2000  # entry flag: the payload is compressed (not readable here)


class CubinError(InputError):
    """A file that is not a readable cubin or fatbin, or holds none for the architecture asked for."""


@dataclass(frozen=True)
class Param:
    """One kernel parameter as the cubin lays it out: its position, byte offset and size."""

    ordinal: int
    offset: int
    size: int


@dataclass(frozen=True)
class Kernel:
    """One __global__ function of a cubin: its (mangled) symbol and parameter table in ordinal order."""

    symbol: str
    params: tuple[Param, ...]
    param_bytes: int  # the parameter bank's size (EIATTR_CBANK_PARAM_SIZE; 0 for a kernel without one)
    local: bool  # a `static` kernel: a LOCAL symbol (still loadable by name)


@dataclass(frozen=True)
class Cubin:
    """The facts of one ELF image: architecture (90 for sm_90) and kernels by symbol."""

    arch: int
    kernels: dict[str, Kernel]


def _u(fmt: str, data: bytes, offset: int) -> tuple:
    try:
        return struct.unpack_from(fmt, data, offset)
    except struct.error:
        raise CubinError("truncated ELF") from None


def elf_arch(data: bytes) -> int:
    """The SM number an ELF image was built for. CUDA 12.8+ images (ELF ABI version 8 and later) keep it
    in e_flags bits 8-15; older ones in bits 0-7."""
    flags = _u("<I", data, 0x30)[0]
    return (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF


def built_for(data: bytes, arch: str) -> bool:
    """Whether `data` is an ELF cubin for `arch` ("sm_90"): a cache entry that is not is built again."""
    try:
        return data[:4] == ELF_MAGIC and elf_arch(data) == int(arch.removeprefix("sm_"))
    except (CubinError, ValueError):
        return False


def _sections(data: bytes) -> list[tuple[str, int, int, int, int]]:
    """(name, type, offset, size, link) of every section of a 64-bit little-endian ELF."""
    if data[:4] != ELF_MAGIC or data[4:6] != b"\x02\x01":
        raise CubinError("not a 64-bit little-endian ELF file (a cubin is one)")
    shoff = _u("<Q", data, 0x28)[0]
    entsize, count, strndx = _u("<HHH", data, 0x3A)
    raw = [_u("<IIQQQQII", data, shoff + i * entsize) for i in range(count)]
    names_at = raw[strndx][4] if strndx < count else 0

    def name(offset: int) -> str:
        end = data.find(b"\0", names_at + offset)
        return data[names_at + offset:end].decode(errors="replace")

    return [(name(s[0]), s[1], s[4], s[5], s[6]) for s in raw]


def _symbols(data: bytes, sections) -> list[tuple[str, int, int, int]]:
    """(name, info, other, section index) of every .symtab entry."""
    for name, kind, offset, size, link in sections:
        if kind == 2:  # SHT_SYMTAB
            if link >= len(sections):
                raise CubinError(f"corrupt ELF: the symbol table's strings are in section {link}, "
                                 f"of {len(sections)}")
            strings = sections[link][2]
            out = []
            for i in range(size // 24):
                st_name, info, other, shndx = _u("<IBBH", data, offset + 24 * i)
                end = data.find(b"\0", strings + st_name)
                out.append((data[strings + st_name:end].decode(errors="replace"), info, other, shndx))
            return out
    raise CubinError("the ELF file has no symbol table")


def _param_table(info: bytes) -> tuple[tuple[Param, ...], int]:
    """The KPARAM_INFO records (in ordinal order) and the parameter bank size of one .nv.info section."""
    params, total, i = [], 0, 0
    while i + 4 <= len(info):
        fmt, attr = info[i], info[i + 1]
        if fmt == _EIFMT_SVAL:
            size = _u("<H", info, i + 2)[0]
            payload = info[i + 4:i + 4 + size]
            i += 4 + size
            if attr == _EIATTR_KPARAM_INFO and len(payload) >= 12:
                _index, ordinal, offset, packed = _u("<IHHI", payload, 0)
                params.append(Param(ordinal, offset, packed >> 18))  # size: the top 14 bits
        elif fmt == _EIFMT_HVAL:
            if attr == _EIATTR_CBANK_PARAM_SIZE:
                total = _u("<H", info, i + 2)[0]
            i += 4
        elif fmt in (_EIFMT_NVAL, _EIFMT_BVAL):
            i += 4
        else:
            raise CubinError(f"unreadable .nv.info record format {fmt}")
    return tuple(sorted(params, key=lambda p: p.ordinal)), total


def read_elf(data: bytes) -> Cubin:
    """Architecture and kernels of one ELF cubin."""
    sections = _sections(data)
    infos = {name[len(".nv.info."):]: data[off:off + size] for name, _k, off, size, _l in sections
             if name.startswith(".nv.info.")}
    kernels = {}
    for name, info, other, _shndx in _symbols(data, sections):
        if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY:
            params, total = _param_table(infos.get(name, b""))
            kernels[name] = Kernel(name, params, total, local=(info >> 4) == 0)
    return Cubin(elf_arch(data), kernels)


def fatbin_elves(data: bytes) -> list[tuple[int, bytes | None]]:
    """(arch, ELF bytes) of every ELF entry of a fatbin; None for a compressed one."""
    magic, _version, header = _u("<IHH", data, 0)
    if magic != FATBIN_MAGIC:
        raise CubinError("not a fatbin (bad magic)")
    if header < _FATBIN_HEADER:
        raise CubinError(f"corrupt fatbin: header size {header} (at least {_FATBIN_HEADER})")
    total = _u("<Q", data, 8)[0]
    out, offset, end = [], header, min(len(data), header + total)
    while offset + _FATBIN_ENTRY_HEADER <= end:
        kind, _ver, head, size = _u("<HHIQ", data, offset)
        _check_entry(offset, head, size, end)  # so that every entry moves `offset` on, inside the file
        arch = _u("<I", data, offset + 28)[0]
        flags = _u("<Q", data, offset + 40)[0]
        if kind == _FATBIN_ELF:
            body = data[offset + head:offset + head + size]
            out.append((arch, None if flags & _FATBIN_COMPRESSED else body))
        offset += head + size
    return out


def _check_entry(offset: int, head: int, size: int, end: int) -> None:
    """A fatbin entry's header holds at least its own fields, and its body ends inside the container: an
    entry of header and size 0 would be read again for ever (and, an ELF one, listed without end)."""
    if head < _FATBIN_ENTRY_HEADER:
        raise CubinError(f"corrupt fatbin: the entry at byte {offset} has a header of {head} bytes "
                         f"(at least {_FATBIN_ENTRY_HEADER})")
    if offset + head + size > end:
        raise CubinError(f"corrupt fatbin: the entry at byte {offset} ({head} + {size} bytes) runs past "
                         f"the end of the fatbin at byte {end}")


def elf_for_arch(data: bytes, arch: int, what: str) -> bytes:
    """The ELF image of `data` (a cubin, or a fatbin's entry) built for `arch`; CubinError naming the
    architectures it has otherwise (`what` names the file in the message)."""
    with named(what):
        return _select(data, arch)


@contextlib.contextmanager
def named(what: str) -> Iterator[None]:
    """CubinErrors of the block start with `what` (the file), whichever reader found the problem."""
    try:
        yield
    except CubinError as exc:
        raise CubinError(f"{what}: {exc}") from None


def _select(data: bytes, arch: int) -> bytes:
    if data[:4] == ELF_MAGIC:
        have = elf_arch(data)
        if have != arch:
            raise CubinError(f"a cubin for sm_{have}, not sm_{arch}")
        return data
    if len(data) >= 4 and _u("<I", data, 0)[0] == FATBIN_MAGIC:
        entries = fatbin_elves(data)
        for have, body in entries:
            if have == arch:
                if body is None:
                    raise CubinError(f"its sm_{arch} entry is compressed (rebuild the fatbin with "
                                     "-Xfatbin=-compress-all=false, or give the cubin)")
                return body
        archs = ", ".join(f"sm_{a}" for a, _ in entries) or "none"
        raise CubinError(f"a fatbin without an sm_{arch} cubin (it has: {archs})")
    raise CubinError("neither a cubin (ELF) nor a fatbin")
