"""C types of kernel parameters as a TOML launch ABI names them ("const float*", "long long", "uint3", a
struct declared in the file): size and alignment (to check a launch against the cubin's parameter
table, toml_abi/abi_check.py) and the numpy value CuPy passes by value.

The layouts are those of nvcc and NVRTC on every 64-bit CUDA target (LP64): pointers 8 bytes, `long`
8, CUDA's vector types as cuda's vector_types.h aligns them (uint3 4, uint2 8, uint4 16), a struct's
fields at their natural alignment in declaration order, its size rounded up to its largest alignment.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from strata_bench.errors import InputError

# name -> (bytes, numpy type code); alignment = size for every scalar
SCALARS: dict[str, tuple[int, str]] = {
    **dict.fromkeys(("char", "signed char", "int8_t"), (1, "i1")),
    **dict.fromkeys(("unsigned char", "uint8_t", "bool"), (1, "u1")),
    **dict.fromkeys(("short", "int16_t"), (2, "i2")),
    **dict.fromkeys(("unsigned short", "uint16_t", "__nv_bfloat16"), (2, "u2")),
    **dict.fromkeys(("__half", "half"), (2, "f2")),
    **dict.fromkeys(("int", "int32_t", "signed", "signed int"), (4, "i4")),
    **dict.fromkeys(("unsigned", "unsigned int", "uint32_t"), (4, "u4")),
    "float": (4, "f4"),
    **dict.fromkeys(("long", "long long", "int64_t", "ptrdiff_t", "long long int"), (8, "i8")),
    **dict.fromkeys(("unsigned long", "unsigned long long", "uint64_t", "size_t"), (8, "u8")),
    "double": (8, "f8"),
}
# CUDA vector types: name -> (element type, count, alignment)
VECTORS: dict[str, tuple[str, int, int]] = {
    "int2": ("int", 2, 8), "uint2": ("unsigned int", 2, 8), "float2": ("float", 2, 8),
    "int3": ("int", 3, 4), "uint3": ("unsigned int", 3, 4), "float3": ("float", 3, 4), "dim3": ("unsigned int", 3, 4),
    "int4": ("int", 4, 16), "uint4": ("unsigned int", 4, 16), "float4": ("float", 4, 16),
    "half2": ("__half", 2, 4), "__half2": ("__half", 2, 4),
    "longlong2": ("long long", 2, 16), "ulonglong2": ("unsigned long long", 2, 16),
}
_QUALIFIERS = ("const", "volatile", "__restrict__", "__restrict", "restrict", "struct")
_COMPONENTS = "xyzw"


@dataclass(frozen=True)
class CType:
    """A parameter's C type: `kind` is scalar, pointer, vector or struct; `fields` (name, type, offset)
    for a vector's components or a struct's fields."""

    name: str
    kind: str
    size: int
    align: int
    code: str = ""  # numpy type code of a scalar (a pointer is passed as uint64)
    fields: tuple[tuple[str, "CType", int], ...] = ()

    @property
    def is_float(self) -> bool:
        return self.kind == "scalar" and self.code.startswith("f")

    def dtype(self):
        """The numpy dtype of a value of this type, laid out as the kernel reads it."""
        import numpy as np

        if self.kind in ("scalar", "pointer"):
            return np.dtype(self.code or "u8")
        return np.dtype({"names": [n for n, _, _ in self.fields], "formats": [t.dtype() for _, t, _ in self.fields],
                         "offsets": [o for _, _, o in self.fields], "itemsize": self.size})


def _strip(text: str) -> str:
    words = [w for w in text.replace("*", " * ").split() if w not in _QUALIFIERS]
    return " ".join(words)


def parse_ctype(text: str, structs: Mapping[str, CType] | None = None) -> CType:
    """The CType `text` names; InputError (naming the known types) for one it does not know."""
    name = _strip(str(text))
    if name.endswith("*"):
        return CType(name.replace(" *", "*"), "pointer", 8, 8, "u8")
    if name in SCALARS:
        size, code = SCALARS[name]
        return CType(name, "scalar", size, size, code)
    if name in VECTORS:
        element, count, align = VECTORS[name]
        item = parse_ctype(element)
        fields = tuple((_COMPONENTS[i], item, i * item.size) for i in range(count))
        return CType(name, "vector", _round(item.size * count, align), align, fields=fields)
    if structs and name in structs:
        return structs[name]
    declared = f"; structs: {', '.join(structs)}" if structs else ""
    raise InputError(f"unknown C type {text!r} (a pointer, a scalar such as int, long long, float, "
                     f"a CUDA vector such as uint3, or a struct declared in a [struct.NAME] table{declared})")


def struct_type(name: str, fields: list[tuple[str, CType]]) -> CType:
    """A struct of `fields` in declaration order at their natural alignment."""
    offset, align, placed = 0, 1, []
    for field_name, ctype in fields:
        offset = _round(offset, ctype.align)
        placed.append((field_name, ctype, offset))
        offset += ctype.size
        align = max(align, ctype.align)
    return CType(name, "struct", _round(offset, align), align, fields=tuple(placed))


def _round(n: int, to: int) -> int:
    return -(-n // to) * to


def layout(types: list[CType]) -> list[int]:
    """Each parameter's offset in the parameter bank, as the compilers place them: at its alignment."""
    offsets, offset = [], 0
    for ctype in types:
        offset = _round(offset, ctype.align)
        offsets.append(offset)
        offset += ctype.size
    return offsets


def address(value: Any) -> int:
    """A pointer's value: a device array's address, or an integer (0 for a null pointer)."""
    data = getattr(value, "data", None)
    return int(data.ptr) if data is not None and hasattr(data, "ptr") else int(value)


def as_argument(ctype: CType, value: Any) -> Any:
    """The object CuPy passes for a parameter: a device array as it is (a pointer), a numpy scalar of
    the type, or a 0-d numpy array of a structured dtype laid out as the vector or struct. CuPy passes a
    numpy array of size one by value, as its bytes (function.pyx's CNumpyArray); a numpy scalar of a
    structured dtype (np.void) is not one of the scalars it knows."""
    import numpy as np

    if ctype.kind == "pointer":
        return value if hasattr(value, "data") else np.uint64(address(value))
    if ctype.kind == "scalar":
        return np.dtype(ctype.code).type(value)
    record = np.zeros((), dtype=ctype.dtype())
    _fill(record, ctype, value)
    return record


def _fill(record: Any, ctype: CType, value: Any) -> None:
    items = dict(zip(_COMPONENTS, value)) if ctype.kind == "vector" else dict(value)
    for name, field_type, _offset in ctype.fields:
        if name not in items:
            continue  # a field the TOML leaves out is zero (a null pointer)
        if field_type.kind in ("vector", "struct"):
            _fill(record[name], field_type, items[name])
        else:
            record[name] = address(items[name]) if field_type.kind == "pointer" else items[name]
