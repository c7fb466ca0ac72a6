"""Launch-tuning candidates of mmvq_new, as a --cases file: families whose variant tables hold old, new and
one variant per candidate config (rows per warp R, blocks per SM MINB, chunk-loop unroll U, FCVT), so the
project's own bench times them all in one run, each checked bitwise against old before it is timed.

    strata-bench bench --cases scripts/mmvq_tune.py --family mmvq_tune1 --shape 131072x8192 --cols 1
    strata-bench bench --cases scripts/mmvq_tune.py --family mmvq_tune8 --shape 131072x8192 --cols 8

`mmvq_tune<W>` holds the candidates for passes of W = 1, 2, 4 and 8 columns; a candidate launches its
config for its own pass width and the family's table for any other. The candidates are configs that did
not spill registers for most formats under ptxas -v (CUDA 13, sm_90); docs/PERF_NOTES.md has the figures.
The winners go into families/mmvq.py's NEW_CONFIGS.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from strata_bench.cases.family import Variant
from strata_bench.families.mmvq import FORMATS, Mmvq, NewConfig, new_config

# (R, MINB, U, FCVT). The first sweep (results/tune, 11:39 UTC) found U = 4 best at one column (8-20%
# faster than U = 0) and little to gain at eight; the second tried wider unrolls and chunk_isum_f, the third
# two and four columns. This one asks for the smallest shared-memory carveout (l1, kernels/launch.py
# prefer_l1): each format's chosen config with it, then launch shapes with it, deeper unrolls among them
# (U = 8 keeps the most weight lines in flight, which is what a larger L1 should hold).
ONE_COLUMN = [NewConfig(r, m, u, f, l1=True) for r, m, u, f in (
    (4, 3, 4, False), (2, 4, 8, False), (2, 3, 8, False), (4, 3, 8, False), (2, 4, 4, False), (4, 2, 8, False),
    (8, 2, 4, False), (1, 5, 8, False))]
EIGHT_COLUMNS = [NewConfig(r, m, u, f, l1=True) for r, m, u, f in ((2, 2, 4, True), (4, 2, 0, True), (4, 2, 2, True))]
TWO_FOUR_COLUMNS = [NewConfig(r, m, u, f, l1=True) for r, m, u, f in ((4, 2, 4, False), (2, 2, 4, False),
                                                                      (4, 2, 2, False))]


ConfigOf = Callable[[str], NewConfig]


def chosen_l1(width: int) -> ConfigOf:
    """Each format's config in the family's table, with the smallest carveout (mmvq_old's passes as they are)."""
    def config_of(fmt: str) -> NewConfig:
        config = new_config(fmt, width)
        return config if config.old else replace(config, l1=True)
    return config_of


def candidate(label: str, config_for: ConfigOf, width: int) -> Variant:
    """The new kernel with config_for(fmt) for passes of `width` columns, the family's table for the others."""
    def config_of(fmt: str, nc: int) -> NewConfig:
        return config_for(fmt) if nc == width else new_config(fmt, nc)

    def kernels(family, source: str) -> list[str]:
        if source != Mmvq.sources[1]:
            return []
        return list(dict.fromkeys(config_for(fmt).kernel(fmt, width) for fmt in FORMATS))

    def launch(family, case, kernels_, dev, outs, stream=None) -> None:
        family.launch_new_passes(case, kernels_, dev, outs, config_of, stream)

    return Variant(label, kernels, launch, f"mmvq_new, {width}-column passes: {label}")


def tune_family(width: int, shapes: list[NewConfig]) -> type:
    """A family `mmvq_tune<width>`: old, new, the chosen configs with l1, then every shape."""
    def bench_cases(self):
        return [self.case(fmt, 131072, 8192, width, "seed:1") for fmt in FORMATS]

    variants = [candidate("chosen-l", chosen_l1(width), width)]
    variants += [candidate(c.label, lambda fmt, c=c: c, width) for c in shapes]
    return type(f"MmvqTune{width}", (Mmvq,), {
        "name": f"mmvq_tune{width}", "bench_cases": bench_cases,
        "description": f"mmvq_new launch candidates for {width}-column passes (scripts/mmvq_tune.py)",
        "variants": (*Mmvq.variants, *variants)})


TUNE_FAMILIES = [tune_family(w, c) for w, c in ((1, ONE_COLUMN), (2, TWO_FOUR_COLUMNS), (4, TWO_FOUR_COLUMNS),
                                                (8, EIGHT_COLUMNS))]
