"""A family's launch ABI: what a kernel following it receives, by name, so a variant can be declared in
TOML (toml_abi/variant.py) instead of Python. docs/ABI.md describes each built-in family's.

An ABI names each kernel argument (C type, layout, how the family fills it from a case's inputs and
outputs), the case fields that launch geometry may use (rows, cols, ncols, nchunks, ...), the
placeholders of kernel name expressions ({traits}, {fmt}, ...) with every value they take when compiling,
the work every variant's launch starts with (mmvq quantizes the activations to q8_1 first) and ends with
(q8_1 copies the blocks' fields apart for their checks). A variant may be several launches (a TOML
variant's [[variant.launch]] tables, in order): every launch takes its arguments from the same ABI.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from strata_bench.cases.case import Case

# (case, dev, outs) -> the argument's value (a cupy array or a numpy scalar of the C type)
ArgValue = Callable[[Case, Mapping[str, Any], Mapping[str, Any]], Any]


@dataclass(frozen=True)
class AbiArg:
    """One kernel argument of an ABI: its name (what a TOML `args` list says), C type and layout."""

    name: str
    ctype: str
    layout: str
    value: ArgValue


@dataclass(frozen=True)
class LaunchAbi:
    """What a TOML variant of a family may use. `fields(case)` and `placeholders(case)` give the values
    for one launch; `field_names` and `placeholder_values` are known without a case (a TOML file is
    checked against them when it is read, and the kernel is compiled for every placeholder set)."""

    family: str
    args: tuple[AbiArg, ...]
    field_names: tuple[str, ...]
    fields: Callable[[Case], Mapping[str, int]]
    placeholder_sets: tuple[Mapping[str, str], ...]  # every {placeholder: value} set compiled (one per format)
    placeholders: Callable[[Case], Mapping[str, str]]
    prelude: Callable[..., None] | None = None  # (family, case, kernels, dev, stream), before the launches
    epilogue: Callable[..., None] | None = None  # (family, case, kernels, dev, outs, stream), after the launches
    baseline: str = "old"
    writes: str = ""

    def arg(self, name: str) -> AbiArg | None:
        """The argument named `name`, None if the ABI has none."""
        return next((a for a in self.args if a.name == name), None)

    @property
    def arg_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.args)

    @property
    def placeholder_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(k for s in self.placeholder_sets for k in s))


def _row_stride(case: Case) -> Any:
    import numpy as np

    from strata_bench.data.weights import row_stride

    return np.int64(row_stride(case.fmt, case.cols))


def padded_row_args(w_layout: str, rows: str, cols: str) -> tuple[AbiArg, ...]:
    """w, stride, rows, nchunks and cols of a family whose weight rows sit at the padded device stride
    (data/weights.py row_stride), as dequant and mmvq pass them; the layouts of w, rows and cols are
    the family's words."""
    import numpy as np

    return (
        AbiArg("w", "const uint8_t*", w_layout, lambda c, d, o: d["w"]),
        AbiArg("stride", "long long", "bytes from one row to the next", lambda c, d, o: _row_stride(c)),
        AbiArg("rows", "int", rows, lambda c, d, o: np.int32(c.rows)),
        AbiArg("nchunks", "int", "32-value chunks per row (cols / 32)", lambda c, d, o: np.int32(c.cols // 32)),
        AbiArg("cols", "int", cols, lambda c, d, o: np.int32(c.cols)),
    )


def abi_table(abi: LaunchAbi) -> str:
    """The markdown table of an ABI's arguments (docs/ABI.md holds one per family; a test keeps them equal)."""
    lines = ["| name | C type | layout |", "|---|---|---|"]
    lines += [f"| `{a.name}` | `{a.ctype}` | {a.layout} |" for a in abi.args]
    return "\n".join(lines)
