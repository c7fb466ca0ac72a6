"""Launch arithmetic (toml_abi/expr.py): integer expressions over named fields, evaluated without eval."""
from __future__ import annotations

import pytest

from strata_bench.toml_abi.expr import parse_expr
from strata_bench.errors import InputError

FIELDS = ("rows", "ncols")


@pytest.mark.parametrize("text,value", [
    ("ceil_div(rows, 8)", 3), ("32 * 8", 256), (256, 256), ("rows // 2 + rows % 4 - -1", 10),
    ("min(rows, 4) * max(ncols, 2, 1)", 12), ("+ncols", 3),
])
def test_values(text, value):
    assert parse_expr(text, FIELDS, "f: k")({"rows": 17, "ncols": 3}) == value


@pytest.mark.parametrize("text,line", [
    ("rows / 2", "f: k: 'rows / 2': only + - * // % (integer arithmetic)"),
    ("rows ** 2", "f: k: 'rows ** 2': only + - * // % (integer arithmetic)"),
    ("rowz + 1", "f: k: 'rowz + 1' uses unknown field 'rowz' (fields: rows, ncols)"),
    ("__import__('os').system('x')", "f: k: \"__import__('os').system('x')\": only ceil_div(a, b), exact_div(a, b), "
                                     "min(...) and max(...) may be called"),
    ("rows.bit_length()", "f: k: 'rows.bit_length()': only ceil_div(a, b), exact_div(a, b), min(...) and max(...) "
                          "may be called"),
    ("exact_div(rows)", "f: k: 'exact_div(rows)': exact_div needs two arguments"),
    ("rows.real", "f: k: 'rows.real': Attribute is not allowed in launch arithmetic"),
    ("1.5 * rows", "f: k: '1.5 * rows': only integer constants (1.5 is not one)"),
    ("'a'", "f: k: \"'a'\": only integer constants ('a' is not one)"),
    ("rows +", "f: k: 'rows +' is not an expression (invalid syntax)"),
    ("ceil_div(rows)", "f: k: 'ceil_div(rows)': ceil_div needs two arguments"),
    ("[rows]", "f: k: '[rows]': List is not allowed in launch arithmetic"),
    ("rows if rows else 1", "f: k: 'rows if rows else 1': IfExp is not allowed in launch arithmetic"),
])
def test_refused(text, line):
    with pytest.raises(InputError) as err:
        parse_expr(text, FIELDS, "f: k")
    assert str(err.value) == line


def test_exact_div_refuses_a_remainder():
    expr = parse_expr("exact_div(rows, 66)", FIELDS, "f: k")
    assert expr({"rows": 660}) == 10
    with pytest.raises(ValueError, match=r"^exact_div\(672, 66\): 672 is not a whole multiple of 66$"):
        expr({"rows": 672})
