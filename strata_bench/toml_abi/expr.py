"""Launch geometry as arithmetic over a case's fields ("ceil_div(rows, 8)", "32 * 8", "ncols * nchunks * 36"),
parsed with ast and evaluated by walking the tree: integers, + - * // %, unary minus, the names the
family's ABI lists, and ceil_div/min/max. Nothing else is accepted (no attributes, no other calls, no
true division), so a TOML file cannot run code."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Mapping

from strata_bench.errors import InputError

_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}
def _exact_div(a: int, b: int) -> int:
    # A stride in blocks must be a whole number of blocks: a row padded to 16 bytes may not be one (iq2_xxs
    # at 2560 inputs: 672 bytes for 660 of 66-byte blocks).
    if b == 0 or a % b:
        raise ValueError(f"exact_div({a}, {b}): {a} is not a whole multiple of {b}")
    return a // b


_CALLS = {"ceil_div": lambda a, b: -(-a // b), "exact_div": _exact_div, "min": min, "max": max}


@dataclass(frozen=True)
class Expr:
    """A checked expression: its text and parsed tree."""

    text: str
    tree: ast.Expression

    def __call__(self, fields: Mapping[str, int]) -> int:
        return _eval(self.tree.body, fields)


def parse_expr(text: str | int, names: tuple[str, ...], where: str) -> Expr:
    """Parse and check `text` (an int is taken as its literal); InputError naming `where` for a syntax
    error, a construct outside the arithmetic above, or a name the ABI does not list."""
    source = str(text)
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise InputError(f"{where}: {source!r} is not an expression ({exc.msg})") from None
    for node in ast.walk(tree):
        _check_node(node, names, where, source)
    return Expr(source, tree)


_TWO = ("ceil_div", "exact_div")
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call, ast.Load, ast.USub, ast.UAdd,
            *_BINOPS)


def _check_node(node: ast.AST, names: tuple[str, ...], where: str, source: str) -> None:
    # ast.walk visits a node before its children, so an operator is judged at its BinOp first.
    if isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
        raise InputError(f"{where}: {source!r}: only + - * // % (integer arithmetic)")
    if not isinstance(node, _ALLOWED):
        raise InputError(f"{where}: {source!r}: {type(node).__name__} is not allowed in launch arithmetic")
    if isinstance(node, ast.Name) and node.id not in names and node.id not in _CALLS:
        raise InputError(f"{where}: {source!r} uses unknown field {node.id!r} (fields: {', '.join(names)})")
    if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.func.id not in _CALLS
                                       or node.keywords):
        raise InputError(f"{where}: {source!r}: only ceil_div(a, b), exact_div(a, b), min(...) and max(...) may be "
                         "called")
    if isinstance(node, ast.Call) and (len(node.args) != 2 if node.func.id in _TWO else not node.args):
        need = "two arguments" if node.func.id in _TWO else "an argument"
        raise InputError(f"{where}: {source!r}: {node.func.id} needs {need}")
    if isinstance(node, ast.Constant) and type(node.value) is not int:
        raise InputError(f"{where}: {source!r}: only integer constants ({node.value!r} is not one)")


def _eval(node: ast.AST, fields: Mapping[str, int]) -> int:
    if isinstance(node, ast.Constant):
        return int(node.value)
    if isinstance(node, ast.Name):
        return int(fields[node.id])
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, fields)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, fields), _eval(node.right, fields))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return int(_CALLS[node.func.id](*(_eval(a, fields) for a in node.args)))
