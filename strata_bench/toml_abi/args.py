"""The arguments of a TOML launch, beyond an ABI name: what a real engine's kernel takes (ggml's
mul_mat_vec_q: a by-value struct, uint3 fastdiv triples, null pointers, strides in blocks).

    args = [
      "w",                                              # an ABI argument by name
      { type = "int", value = "exact_div(stride, block_bytes)" },   # a typed expression over case fields
      { type = "float", value = 1.0 },                  # a constant
      { type = "const int32_t*", value = "null" },      # a null pointer
      { type = "uint3", fastdiv = "ncols" },            # (mp, L, d) such that n / d = (mulhi(n, mp) + n) >> L
      { type = "uint3", value = ["rows", 1, 1] },       # a vector by components
      { struct = "fusion", gate = "null", scale = 1.0 } # a struct declared in [struct.fusion], by value
    ]

A struct field takes the same values as a typed argument; fields left out are zero (null pointers).
Each argument knows its C type (for the cubin's parameter table) and its value for a case.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from strata_bench.toml_abi.abi import LaunchAbi
from strata_bench.toml_abi.c_types import CType, as_argument, parse_ctype, struct_type
from strata_bench.toml_abi.expr import Expr, parse_expr
from strata_bench.errors import InputError

ARG_KEYS = ("type", "value", "fastdiv", "struct")
_FLOAT_MAX = {2: 65504.0, 4: 3.4028234663852886e38, 8: 1.7976931348623157e308}  # by size: half, float, double


@dataclass(frozen=True)
class Context:
    """What a value is computed from at launch: the ABI, the case, its fields and its device arrays."""

    abi: LaunchAbi
    case: Any
    fields: Mapping[str, int]
    dev: Mapping[str, Any]
    outs: Mapping[str, Any]


@dataclass(frozen=True)
class Arg:
    """One kernel argument: its label (how messages name it), C type and value source. `kind` is one of
    abi (an ABI argument), expr (integer arithmetic over the case fields), const (a number), null,
    fastdiv, vector (`parts`) or struct (`parts`, by field name)."""

    label: str
    ctype: CType
    kind: str
    name: str = ""  # the ABI argument (kind abi)
    expr: Expr | None = None  # kind expr and fastdiv
    const: float | int = 0
    parts: tuple[tuple[str, "Arg"], ...] = ()

    def python(self, ctx: Context) -> Any:
        """The value as Python: a number, a device array (a pointer), a list (vector) or a dict (struct)."""
        if self.kind == "abi":
            return ctx.abi.arg(self.name).value(ctx.case, ctx.dev, ctx.outs)
        if self.kind == "expr":
            return _number(self.ctype, self.expr(ctx.fields), self.label)
        if self.kind == "const":
            return self.const
        if self.kind == "null":
            return 0
        if self.kind == "fastdiv":
            return fastdiv_values(self.expr(ctx.fields), self.label)
        values = [part.python(ctx) for _, part in self.parts]
        return values if self.kind == "vector" else dict(zip((n for n, _ in self.parts), values))

    def value(self, ctx: Context) -> Any:
        """The object CuPy passes for this parameter."""
        raw = self.python(ctx)
        if self.kind == "abi" and self.ctype.kind == "pointer":
            return raw  # the ABI's own device array
        return as_argument(self.ctype, raw)


def fastdiv_values(d: int, label: str = "fastdiv") -> tuple[int, int, int]:
    """(mp, L, d) with L = ceil(log2 d) and mp = floor(2^32 (2^L - d) / d) + 1 mod 2^32, so that for any
    32-bit n, n / d = (mulhi(n, mp) + n) >> L (Granlund and Montgomery's division by invariant integers,
    figure 4.1; the triple ggml's kernels take as uint3)."""
    if not 0 < d < 2**32:
        raise InputError(f"{label}: fastdiv of {d}: the divisor must be in 1 .. 2^32 - 1")
    shift = (d - 1).bit_length()
    return ((2**32 * (2**shift - d)) // d + 1) % 2**32, shift, d


def _number(ctype: CType, value: int | float, label: str) -> int | float:
    if ctype.is_float:
        if abs(value) > _FLOAT_MAX.get(ctype.size, _FLOAT_MAX[8]):  # it would pass as inf (or not at all)
            raise InputError(f"{label}: {_shown(value)} does not fit {ctype.name}")
        return float(value)
    bits = 8 * ctype.size
    low, high = (0, 2**bits - 1) if ctype.code.startswith("u") or ctype.kind == "pointer" else (
        -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not low <= value <= high:
        raise InputError(f"{label}: {_shown(value)} does not fit {ctype.name}")
    return value


def _shown(value: int | float) -> str:
    # An integer of thousands of digits is a ValueError in str() (Python's int-string limit).
    if isinstance(value, int) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    return str(value)


# --- parsing ----------------------------------------------------------------------------------------------
def parse_structs(doc: Mapping[str, Any], where: str) -> dict[str, CType]:
    """The [struct.NAME] tables of a variants file: field = "C type", in declaration order (a field may be
    a struct declared above it)."""
    tables = doc.get("struct", {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise InputError(f"{where}: struct: expected [struct.NAME] tables of field = \"C type\"")
    structs: dict[str, CType] = {}
    for name, fields in tables.items():
        if not name.isidentifier() or not fields:
            raise InputError(f"{where}: struct.{name}: a struct needs a C name and at least one field")
        typed = []
        for field, text in fields.items():
            if not isinstance(text, str):
                raise InputError(f"{where}: struct.{name}.{field}: expected a C type string, got {text!r}")
            typed.append((field, _ctype(text, structs, f"{where}: struct.{name}.{field}")))
        structs[name] = struct_type(name, typed)
    return structs


def _ctype(text: str, structs: Mapping[str, CType], where: str) -> CType:
    try:
        return parse_ctype(text, structs)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


def abi_ctype(abi: LaunchAbi, name: str) -> CType:
    """The C type of an ABI argument (its declared ctype)."""
    return parse_ctype(abi.arg(name).ctype)


def parse_arg(item: Any, abi: LaunchAbi, structs: Mapping[str, CType], where: str) -> Arg:
    """One entry of an `args` list (a string: an ABI argument; a table: see the module's docstring)."""
    if isinstance(item, str):
        if abi.arg(item) is None:
            raise InputError(f"{where}: unknown argument {item!r} ({abi.family} ABI: {', '.join(abi.arg_names)})")
        return Arg(item, abi_ctype(abi, item), "abi", name=item)
    if not isinstance(item, dict):
        raise InputError(f"{where}: expected an ABI argument name or a table ({', '.join(ARG_KEYS)}), got {item!r}")
    if "struct" in item:
        return _struct_arg(item, abi, structs, where)
    unknown = sorted(set(item) - set(ARG_KEYS))
    if unknown:
        raise InputError(f"{where}.{unknown[0]}: unknown key (an argument table has type and value, or type "
                         "uint3 and fastdiv, or struct and its fields)")
    if "type" not in item:
        raise InputError(f"{where}: a typed argument needs type (and value or fastdiv)")
    ctype = _ctype(item["type"], structs, f"{where}.type")
    if ("value" in item) == ("fastdiv" in item):
        raise InputError(f"{where}: give value or fastdiv (one of them)")
    raw = item["value"] if "value" in item else {"fastdiv": item["fastdiv"]}
    return parse_value(ctype, raw, abi, structs, where, label=_label(item))


def _label(item: Mapping[str, Any]) -> str:
    if "struct" in item:
        return f"struct {item['struct']}"
    shown = item.get("value", item.get("fastdiv"))
    return f"{item['type']} {'fastdiv ' if 'fastdiv' in item else ''}{shown}"


def _struct_arg(item: Mapping[str, Any], abi: LaunchAbi, structs: Mapping[str, CType], where: str) -> Arg:
    name = item["struct"]
    if name not in structs:
        known = ", ".join(structs) or "none declared"
        raise InputError(f"{where}.struct: unknown struct {name!r} (structs: {known}; declare it in a [struct.{name}] "
                         "table)")
    values = {k: v for k, v in item.items() if k != "struct"}
    return parse_value(structs[name], values, abi, structs, where, label=f"struct {name}")


def parse_value(ctype: CType, raw: Any, abi: LaunchAbi, structs: Mapping[str, CType], where: str,
                label: str = "") -> Arg:
    """A value of type `ctype` from its TOML spelling (see the module's docstring)."""
    label = label or ctype.name
    if ctype.kind == "pointer":
        return _pointer(ctype, raw, abi, where, label)
    if ctype.kind == "struct":
        if not isinstance(raw, dict):
            raise InputError(f"{where}: a {ctype.name} value is a table of its fields, got {raw!r}")
        names = [n for n, _, _ in ctype.fields]
        unknown = [k for k in raw if k not in names]
        if unknown:
            raise InputError(f"{where}.{unknown[0]}: unknown field of struct {ctype.name} (fields: {', '.join(names)})")
        parts = tuple((n, parse_value(t, raw[n], abi, structs, f"{where}.{n}")) for n, t, _ in ctype.fields if n in raw)
        return Arg(label, ctype, "struct", parts=parts)
    if ctype.kind == "vector":
        if isinstance(raw, dict) and set(raw) == {"fastdiv"} and ctype.name in ("uint3", "dim3"):
            return Arg(label, ctype, "fastdiv", expr=parse_expr(raw["fastdiv"], abi.field_names, f"{where}.fastdiv"))
        if not isinstance(raw, list) or len(raw) != len(ctype.fields):
            raise InputError(f"{where}: a {ctype.name} value is a list of {len(ctype.fields)} components"
                             f"{' or { fastdiv = EXPR }' if ctype.name == 'uint3' else ''}, got {raw!r}")
        parts = tuple((n, parse_value(t, raw[i], abi, structs, f"{where}[{i}]")) for i, (n, t, _) in
                      enumerate(ctype.fields))
        return Arg(label, ctype, "vector", parts=parts)
    return _scalar(ctype, raw, abi, where, label)


def _pointer(ctype: CType, raw: Any, abi: LaunchAbi, where: str, label: str) -> Arg:
    if raw == "null":
        return Arg(label, ctype, "null")
    if isinstance(raw, str) and abi.arg(raw) is not None and abi_ctype(abi, raw).kind == "pointer":
        return Arg(label, ctype, "abi", name=raw)
    pointers = [a.name for a in abi.args if parse_ctype(a.ctype).kind == "pointer"]
    raise InputError(f"{where}: a pointer is \"null\" or a pointer argument of the {abi.family} ABI "
                     f"({', '.join(pointers)}), got {raw!r}")


def _scalar(ctype: CType, raw: Any, abi: LaunchAbi, where: str, label: str) -> Arg:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise InputError(f"{where}: a {ctype.name} value is a number or an expression, got {raw!r}")
    if isinstance(raw, float):
        if not ctype.is_float:
            raise InputError(f"{where}: {raw!r} is not an integer ({ctype.name})")
        return Arg(label, ctype, "const", const=_number(ctype, raw, where))
    if isinstance(raw, str) and raw.strip() not in abi.field_names and abi.arg(raw.strip()) is not None:
        return Arg(label, ctype, "abi", name=raw.strip())  # an ABI scalar, as this type
    expr = parse_expr(raw, abi.field_names, where)
    constant = _constant(expr)
    if constant is not None:  # a constant that cannot fit is known when the file is read, not at a launch
        _number(ctype, constant, where)
    return Arg(label, ctype, "expr", expr=expr)


def _constant(expr: Expr) -> int | None:
    """The value of an expression over no case field (None where it reads one, or cannot be computed)."""
    try:
        return expr({})
    except (KeyError, ArithmeticError, InputError):
        return None
