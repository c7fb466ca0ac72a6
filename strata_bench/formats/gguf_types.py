"""Which format a GGUF tensor type id is read as, and which type id a format is written as.

Type ids come from the formats' `gguf_type_id`: gguf-py's enum value where gguf-py knows the type,
42 for upstream ggml's Q2_0 (`q2_0_ggml`), and None for the engine's own Q2_0 (`q2_0`), which is not
a GGUF type and must never be written under 42 or any other id.
"""
from __future__ import annotations

from strata_bench.errors import InputError
from strata_bench.formats import QuantFormat, all_formats


def gguf_type_id(fmt: QuantFormat) -> int | None:
    """The format's GGUF type id, or None where it has none."""
    return getattr(fmt, "gguf_type_id", None)


def formats_by_gguf_type() -> dict[int, QuantFormat]:
    """Every registered format that has a GGUF type id, by that id. Two formats claiming one id is a bug."""
    by_id: dict[int, QuantFormat] = {}
    for fmt in all_formats().values():
        type_id = gguf_type_id(fmt)
        if type_id is None:
            continue
        if type_id in by_id:
            raise RuntimeError(f"formats {by_id[type_id].name} and {fmt.name} both claim GGUF type id {type_id}")
        by_id[type_id] = fmt
    return by_id


def format_for_gguf_type(type_id: int) -> QuantFormat:
    """The format a GGUF tensor of this type id is read as (42 is always upstream's `q2_0_ggml`)."""
    try:
        return formats_by_gguf_type()[int(type_id)]
    except KeyError:
        raise InputError(f"GGUF type id {int(type_id)} is not a quant format strata-bench knows") from None


def gguf_type_to_write(fmt: QuantFormat) -> int:
    """The type id to write a tensor of `fmt` under; InputError for formats that are not GGUF types."""
    type_id = gguf_type_id(fmt)
    if type_id is None:
        raise InputError(f"{fmt.name} is this project's own format, not a GGUF type: it has no GGUF type id "
                         "and cannot be written to a GGUF file")
    return type_id
