"""Integers read from text a user gave (a results file's JSON, a ggml tree's headers), bounded by their
length before int() parses them.

int() of a 5000-digit literal raises ValueError (past Python's int-string limit), a traceback where no
reader expects one; one of 30 digits parses, then drives a loop or an allocation without end. A literal
with more digits than its bound's own is out of range whatever it says, so it is refused unparsed.
"""
from __future__ import annotations

SHOWN_DIGITS = 20  # a longer literal is named by its length in messages, not printed


def digits(literal: str) -> int:
    """How many digits the integer literal has, its sign aside."""
    return len(literal.lstrip("+-"))


def bounded(literal: str, least: int, most: int) -> int | None:
    """The value of the integer `literal` where it lies in [least, most]; None otherwise, decided from its
    length first, so a literal of any size is safe to pass."""
    if digits(literal) > len(str(max(abs(least), abs(most)))):
        return None
    value = int(literal)
    return value if least <= value <= most else None


def shown(literal: str) -> str:
    """The literal as a message names it: itself where short, else its size ('an integer of 5000 digits')."""
    return literal if digits(literal) <= SHOWN_DIGITS else f"an integer of {digits(literal)} digits"
