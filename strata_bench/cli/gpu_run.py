"""What a GPU run (parity, bench, kernel A/B) does when a variant's compiler is missing: the run is
skipped with exit 77, as for a host without a GPU, where `compile` says the same line with exit 2
(bad input: nothing could run it on any host without that compiler)."""
from __future__ import annotations

from contextlib import contextmanager

from strata_bench.errors import ToolMissing
from strata_bench.kernels.nvcc import NvccMissing


@contextmanager
def compilers_for_gpu_run():
    try:
        yield
    except NvccMissing as exc:
        raise ToolMissing(f"{exc}; the GPU run is skipped") from None
