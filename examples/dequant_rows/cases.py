"""A new variant of an existing family, proved against the old one with `strata-bench parity`:

    strata-bench parity --kernels examples/dequant_rows --cases examples/dequant_rows/cases.py --family my_dequant

The family inherits everything from the built-in `dequant` family (inputs, references, tolerances)
and adds one variant, "rows", compiled from this folder. Every case then runs both variants and
checks "rows" byte for byte against "dequant" (the baseline, listed first), and both against gguf-py.
"""
from dataclasses import replace

import numpy as np

from strata_bench.families import _iq
from strata_bench.families.dequant import Dequant

WARPS_PER_BLOCK = 8


class MyDequant(Dequant):
    name = "my_dequant"  # registering under a new name keeps the built-in family as it is
    sources = ("dequant/dequant.cu", "my_dequant.cu")  # a built-in source and this folder's own

    def default_cases(self):
        return [replace(c, family=self.name, variants=("dequant", "rows")) for c in super().default_cases()]

    def bench_cases(self):
        return [replace(c, family=self.name, variants=("dequant", "rows")) for c in super().bench_cases()]

    def name_expressions(self, source):
        if source == "my_dequant.cu":
            return [f"my_dequant_rows<{_iq.traits(fmt)}>" for fmt in _iq.FORMATS]
        return super().name_expressions(source)

    def launch(self, case, variant, kernels, dev, outs, stream=None):
        if variant != "rows":
            return super().launch(case, variant, kernels, dev, outs, stream)
        fn = kernels.get(f"my_dequant_rows<{_iq.traits(case.fmt)}>")
        grid = (-(-case.rows // WARPS_PER_BLOCK),)
        fn(grid, (32 * WARPS_PER_BLOCK,), (dev["w"], np.int64(_iq.row_stride(case.fmt, case.cols)),
                                           np.int32(case.rows), np.int32(case.cols // 32), outs["y"]),
           stream=stream)
