"""A TOML launch checked against the compiled kernel's parameter table (kernels/cubin.py), on the CPU
and before any launch: as many arguments as parameters, and each argument of the size and at the offset
(so the alignment) the compiler gave its parameter. A launch that passed the wrong argument list would
otherwise read garbage or past its arguments without an error."""
from __future__ import annotations

from typing import Sequence

from strata_bench.toml_abi.c_types import CType, layout
from strata_bench.errors import InputError
from strata_bench.kernels.cubin import Kernel


class AbiMismatch(InputError):
    """A launch's arguments that do not match the cubin's parameters of its kernel."""


def check_params(kernel: Kernel, types: Sequence[CType], labels: Sequence[str], where: str, name: str) -> None:
    """AbiMismatch naming `where` (the TOML key's prefix, e.g. "v.toml: variant 'x': ") and the first
    difference between the declared argument types and the cubin's parameters of kernel `name`."""
    if len(kernel.params) != len(types):
        raise AbiMismatch(f"{where}args: {len(types)} arguments for the {len(kernel.params)} parameters of {name} "
                          f"in the cubin (sizes {[p.size for p in kernel.params]})")
    for i, (param, ctype, offset, label) in enumerate(zip(kernel.params, types, layout(list(types)), labels)):
        if param.size != ctype.size or param.offset != offset:
            raise AbiMismatch(f"{where}args[{i}]: {label!r} is {ctype.name}, {ctype.size} bytes at offset {offset}; "
                              f"the cubin's parameter {i} of {name} is {param.size} bytes at offset {param.offset}")
