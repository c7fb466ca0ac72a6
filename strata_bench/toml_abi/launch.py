"""One kernel launch of a TOML variant (toml_abi/variant.py): its kernel name expression, grid, block,
dynamic shared memory and arguments, checked against the family's launch ABI when the file is read, and
run against a case's fields when the variant launches.

A variant is one launch (the keys kernel, grid, block, shared, args in its [[variant]] table) or an
ordered list of them ([[variant.launch]] tables with the same keys), for families whose work is several
kernels (swiglu_q8's h then q8_1, grouped's quantize, gate/up, quantize, down). Every launch draws its
arguments from the same ABI, so one launch's output (an ABI workspace or output) is the next one's input.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from strata_bench.toml_abi.abi import LaunchAbi
from strata_bench.toml_abi.c_types import CType
from strata_bench.toml_abi.expr import Expr, parse_expr
from strata_bench.toml_abi.args import Arg, Context, parse_arg
from strata_bench.errors import InputError

LAUNCH_REQUIRED = ("kernel", "grid", "block", "args")
LAUNCH_KEYS = (*LAUNCH_REQUIRED, "shared")


@dataclass(frozen=True)
class TomlLaunch:
    """One checked launch: the name expression (placeholders from the ABI), geometry over its fields,
    and the argument names in kernel parameter order."""

    kernel: str
    grid: tuple[Expr, ...]
    block: tuple[Expr, ...]
    shared: Expr
    args: tuple[str, ...]  # each argument's label: an ABI name as given, a table's type and value
    params: tuple[Arg, ...] = ()  # the arguments, parsed (toml_abi/args.py); empty: `args` are ABI names

    @property
    def arguments(self) -> tuple[Arg, ...]:
        return self.params

    def run(self, abi: LaunchAbi, case: Any, lookup: Callable[[str], Any], dev: Mapping[str, Any],
            outs: Mapping[str, Any], stream: Any, where: str, names: Mapping[str, str] | None = None) -> None:
        """Launch on the case: `lookup(name)` gives the compiled kernel of a name expression; `names` are
        the case's placeholder values (the ABI's, by default)."""
        from strata_bench.kernels.launch import allow_dynamic_shared

        fields = dict(abi.fields(case))
        fn = lookup(self.kernel.format(**(abi.placeholders(case) if names is None else names)))
        grid = evaluate(self.grid, fields, f"{where}grid")
        block = evaluate(self.block, fields, f"{where}block")
        check_grid(grid, f"{where}grid")
        check_block(block, f"{where}block")
        shared = evaluate((self.shared,), fields, f"{where}shared", shared=True)[0]
        if shared:
            allow_dynamic_shared(fn, shared)
        if self.params:
            ctx = Context(abi, case, fields, dev, outs)
            try:
                args = tuple(arg.value(ctx) for arg in self.params)
            except (ZeroDivisionError, ValueError, TypeError) as exc:
                raise InputError(f"{where}args: {exc}") from None
        else:
            args = tuple(abi.arg(name).value(case, dev, outs) for name in self.args)
        fn(grid, block, args, shared_mem=shared, stream=stream)


def parse_launch(table: Mapping[str, Any], abi: LaunchAbi, where: Callable[[str], str],
                 structs: Mapping[str, CType] | None = None, placeholders: tuple[str, ...] = ()) -> TomlLaunch:
    """The launch keys of one table (a [[variant]] or one of its [[variant.launch]] tables); `structs`
    are the file's [struct.NAME] types, `placeholders` the variant's own ([variant.placeholders])."""
    kernel = table["kernel"]
    if not isinstance(kernel, str) or not kernel.strip():
        raise InputError(f"{where('kernel')}: expected a non-empty string, got {kernel!r}")
    kernel = kernel.strip()
    check_placeholders(kernel, abi, where("kernel"), placeholders)
    fields = abi.field_names
    block = dims(table["block"], fields, where("block"))
    if all(not _names(e) for e in block):  # constant: checked now, not at the first launch
        check_block(tuple(e({}) for e in block), where("block"))
    params = parse_args(table["args"], abi, where("args"), structs or {})
    return TomlLaunch(kernel=kernel, grid=dims(table["grid"], fields, where("grid")), block=block,
                      shared=parse_expr(table.get("shared", 0), fields, where("shared")),
                      args=tuple(p.label for p in params), params=params)


# CUDA's limits on every current architecture: threads per block, and each dimension of block and grid.
MAX_THREADS = 1024
BLOCK_LIMITS = (1024, 1024, 64)
GRID_LIMITS = (2**31 - 1, 65535, 65535)


def check_block(block: tuple[int, ...], where: str) -> None:
    threads = 1
    for n in block:
        threads *= n
    over = [i for i, n in enumerate(block) if n > BLOCK_LIMITS[i]]
    if threads > MAX_THREADS or over:
        raise InputError(f"{where}: {list(block)} is {threads} threads (a block holds at most {MAX_THREADS}; "
                         f"x and y at most 1024, z at most 64)")


def check_grid(grid: tuple[int, ...], where: str) -> None:
    over = [i for i, n in enumerate(grid) if n > GRID_LIMITS[i]]
    if over:
        raise InputError(f"{where}: {list(grid)}: grid dimension {'xyz'[over[0]]} is over its limit "
                         f"{GRID_LIMITS[over[0]]}")


def _names(expr: Expr) -> set[str]:
    import ast

    return {n.id for n in ast.walk(expr.tree) if isinstance(n, ast.Name)}


def check_placeholders(kernel: str, abi: LaunchAbi, where: str, own: tuple[str, ...] = ()) -> None:
    try:
        names = [field for _, field, spec, conv in string.Formatter().parse(kernel) if field is not None]
    except ValueError as exc:
        raise InputError(f"{where}: {kernel!r}: {exc}") from None
    for name in names:
        if name not in abi.placeholder_names and name not in own:
            known = ", ".join("{" + p + "}" for p in (*abi.placeholder_names, *own)) or "none"
            raise InputError(f"{where}: {kernel!r} uses unknown placeholder {{{name}}} (placeholders: {known})")


def dims(value: Any, fields: tuple[str, ...], where: str) -> tuple[Expr, ...]:
    items = value if isinstance(value, list) else [value]
    if not 1 <= len(items) <= 3 or not all(isinstance(v, (int, str)) and not isinstance(v, bool) for v in items):
        raise InputError(f"{where}: expected 1 to 3 integers or expressions, got {value!r}")
    return tuple(parse_expr(v, fields, f"{where}[{i}]") for i, v in enumerate(items))


def parse_args(value: Any, abi: LaunchAbi, where: str, structs: Mapping[str, CType]) -> tuple[Arg, ...]:
    """The `args` list: ABI names and argument tables (toml_abi/args.py), in kernel parameter order."""
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: expected a list of argument names or tables, got {value!r}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, str) and item in value[:i]:
            # A value a kernel takes twice is said as such ({ type = "int", value = "rows" }), not by a repeat.
            raise InputError(f"{where}[{i}]: {item!r} is listed twice (args[{value.index(item)}] too)")
        out.append(parse_arg(item, abi, structs, f"{where}[{i}]"))
    return tuple(out)


def evaluate(exprs: tuple[Expr, ...], fields: Mapping[str, int], where: str, shared: bool = False) -> tuple[int, ...]:
    try:
        out = tuple(e(fields) for e in exprs)
    except (ZeroDivisionError, ValueError, TypeError) as exc:
        raise InputError(f"{where}: {exc}") from None
    if (min(out) < 1 and not shared) or (shared and out[0] < 0):
        raise InputError(f"{where} is {out} for these fields")
    return out
