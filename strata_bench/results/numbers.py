"""The JSON of a results file with every number bounded, refused in one line naming its field.

A results file may have been edited or written by another tool. Python parses an integer of any length
(one of 5000 digits is a ValueError, past the int-string limit; one of 30 digits makes an index loop
for ever) and a float up to 1.8e308 (whose square, in a variance, is inf). Every number is bounded at
parse time, so no reader meets one it cannot use.
"""
from __future__ import annotations

import json
import math
from typing import Any

from strata_bench import literals
from strata_bench.errors import InputError

MAX_DIGITS = 20  # 2**64 has 20: every seed, count, size and nanosecond stamp a writer records fits
_MOST = 10**MAX_DIGITS - 1
# A figure whose square still sums over 10**5 runs without overflow (sqrt(1.8e308 / 1e5) is 4e151).
MAX_MAGNITUDE = 1e150


class _OutOfRange(str):
    """A number's text, kept unparsed until the walk names its field."""


def loads(text: str, where: str) -> Any:
    """json.loads of `text`; InputError starting with `where` for the first number out of range."""
    bad: list[str] = []

    def integer(literal: str) -> Any:
        value = literals.bounded(literal, -_MOST, _MOST)
        if value is None:
            bad.append(literal)
            return _OutOfRange(literal)
        return value

    def real(literal: str) -> Any:
        value = float(literal)
        if math.isfinite(value) and abs(value) <= MAX_MAGNITUDE:
            return value
        bad.append(literal)
        return _OutOfRange(literal)

    body = json.loads(text, parse_int=integer, parse_float=real)
    if bad:  # the walk runs only for a file that holds one
        field, literal = _first(body, "")
        raise InputError(f"{where}: {field or 'the value'!r} is {_shown(literal)}")
    return body


def _first(value: Any, path: str) -> tuple[str, str] | None:
    """(field path, text) of the first out-of-range number under `value`."""
    if isinstance(value, _OutOfRange):
        return path, str(value)
    if isinstance(value, dict):
        items = ((f"{path}.{k}" if path else k, v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    return next((found for sub, v in items if (found := _first(v, sub)) is not None), None)


def _shown(literal: str) -> str:
    if literal.lstrip("-").isdigit():
        return f"an integer of {literals.digits(literal)} digits (at most {MAX_DIGITS})"
    return f"{literal[:40]}, beyond +/-{MAX_MAGNITUDE:g}"
