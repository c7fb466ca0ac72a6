"""Launch-tuning candidates of mmvq_new, as a --cases file: two families whose variant tables hold old, new
and one variant per candidate config (rows per warp R, blocks per SM MINB, chunk-loop unroll U), so the
project's own bench times them all in one run, each checked bitwise against old before it is timed.

    strata-bench bench --cases scripts/mmvq_tune.py --family mmvq_tune1 --shape 131072x8192 --cols 1
    strata-bench bench --cases scripts/mmvq_tune.py --family mmvq_tune8 --shape 131072x8192 --cols 8

`mmvq_tune1` holds 1-column candidates, `mmvq_tune8` 8-column ones; a candidate launches its config for
its own pass width and the family's table for any other. The candidates are the configs that did not
spill registers for most formats under ptxas -v (CUDA 13, sm_90); docs/PERF_NOTES.md has the figures.
The winners go into families/mmvq.py's NEW_CONFIGS.
"""
from __future__ import annotations

from strata_bench.cases.family import Variant
from strata_bench.families.mmvq import FORMATS, Mmvq, NewConfig, new_config

ONE_COLUMN = [NewConfig(r, m, u) for r, m, u in (
    (1, 4, 0), (1, 4, 2), (1, 4, 4), (1, 5, 4), (1, 6, 0), (1, 6, 2),
    (2, 3, 2), (2, 4, 0), (2, 4, 2), (2, 4, 4), (2, 5, 2),
    (4, 3, 2), (4, 3, 4), (4, 4, 0), (4, 4, 2),
    (8, 3, 0), (8, 3, 4))]
EIGHT_COLUMNS = [NewConfig(r, m, u) for r, m, u in (
    (1, 2, 0), (1, 3, 0), (2, 2, 0), (2, 3, 0), (4, 2, 0), (1, 2, 2), (2, 2, 2), (1, 1, 2))]


def candidate(config: NewConfig, width: int) -> Variant:
    """The new kernel with `config` for passes of `width` columns, the family's table for the others."""
    def config_of(fmt: str, nc: int) -> NewConfig:
        return config if nc == width else new_config(fmt, nc)

    def kernels(family, source: str) -> list[str]:
        if source != Mmvq.sources[1]:
            return []
        return [config.kernel(fmt, width) for fmt in FORMATS]

    def launch(family, case, kernels_, dev, outs, stream=None) -> None:
        family.launch_new_passes(case, kernels_, dev, outs, config_of, stream)

    return Variant(config.label, kernels, launch, f"mmvq_new, {width}-column passes as {config}")


class MmvqTune1(Mmvq):
    name = "mmvq_tune1"
    description = "mmvq_new launch candidates for 1-column passes (scripts/mmvq_tune.py)"
    variants = (*Mmvq.variants, *(candidate(c, 1) for c in ONE_COLUMN))

    def bench_cases(self):
        return [self.case(fmt, 131072, 8192, 1, "seed:1") for fmt in FORMATS]


class MmvqTune8(Mmvq):
    name = "mmvq_tune8"
    description = "mmvq_new launch candidates for 8-column passes (scripts/mmvq_tune.py)"
    variants = (*Mmvq.variants, *(candidate(c, 8) for c in EIGHT_COLUMNS))

    def bench_cases(self):
        return [self.case(fmt, 131072, 8192, 8, "seed:1") for fmt in FORMATS]
