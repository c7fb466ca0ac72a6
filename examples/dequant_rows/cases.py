"""A new variant of an existing family, proved against the old one with `strata-bench parity`:

    strata-bench parity --kernels examples/dequant_rows --cases examples/dequant_rows/cases.py --family my_dequant

The family inherits everything from the built-in `dequant` family (inputs, references, tolerances)
and adds one variant, "rows", compiled from this folder: one entry in its variant table. Every case
then runs both variants and checks "rows" byte for byte against "dequant" (the baseline, listed first),
and both against gguf-py. Only the public kit is used (strata_bench.kit, docs/EXTENDING.md).

The same variant needs no Python at all when it follows dequant's launch ABI (docs/ABI.md):

    strata-bench parity --variants examples/dequant_rows/variants.toml --family dequant
"""
import numpy as np

from strata_bench.kit import KERNEL_FORMATS, Variant, builtin_family, ceil_div, row_stride, traits

Dequant = builtin_family("dequant")

WARPS_PER_BLOCK = 8


def rows_kernels(family, source):
    """my_dequant_rows<F> for every format, from this folder's source."""
    return [f"my_dequant_rows<{traits(fmt)}>" for fmt in KERNEL_FORMATS] if source == "my_dequant.cu" else []


def launch_rows(family, case, kernels, dev, outs, stream=None):
    """One warp per row, 8 rows per block."""
    fn = kernels.get(f"my_dequant_rows<{traits(case.fmt)}>")
    grid = (ceil_div(case.rows, WARPS_PER_BLOCK),)
    fn(grid, (32 * WARPS_PER_BLOCK,), (dev["w"], np.int64(row_stride(case.fmt, case.cols)),
                                       np.int32(case.rows), np.int32(case.cols // 32), outs["y"]),
       stream=stream)


class MyDequant(Dequant):
    name = "my_dequant"  # registering under a new name keeps the built-in family as it is
    sources = ("dequant/dequant.cu", "my_dequant.cu")  # a built-in source and this folder's own
    variants = Dequant.variants + (Variant("rows", rows_kernels, launch_rows, "one warp per row"),)
