"""Quant formats: one small registered class per format.

A format knows its block geometry, its gguf type (gguf-py is the dequantization oracle wherever it
has the format), and how to make seeded random and edge-case blocks. Subclasses register themselves
(a name taken by another class, or a subclass of a format that names none of its own, is a RegistryError):

    class Q8_0(QuantFormat, name="q8_0", block_size=32, type_size=34, qtype=GGMLQuantizationType.Q8_0): ...
"""
from __future__ import annotations

from strata_bench.errors import InputError
from strata_bench.formats.base import FORMATS, QuantFormat  # the package's public names


def get_format(name: str) -> QuantFormat:
    _load_builtin()
    try:
        return FORMATS[name.lower()]
    except KeyError:
        raise InputError(f"unknown format {name!r}; known: {', '.join(sorted(FORMATS))}") from None


def all_formats() -> dict[str, QuantFormat]:
    _load_builtin()
    return FORMATS


def _load_builtin() -> None:
    # Importing the modules runs the class statements, which register the formats.
    from strata_bench.formats import fp4, iquants, kquants, legacy, q2_0, q2_0_ggml, ternary  # noqa: F401
