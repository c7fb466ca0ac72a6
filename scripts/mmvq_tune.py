"""Launch-tuning candidates of mmvq_new, as a --cases file: families whose variant tables hold old, new and
one variant per candidate config (rows per warp R, blocks per SM MINB, chunk-loop unroll U, FCVT, table
copies), so the project's own bench times them all in one run, each checked bitwise against old before it
is timed.

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
from strata_bench.families.mmvq import FORMATS, NEW_CONFIGS, Mmvq, NewConfig, new_config
from strata_bench.kernels.constants import TABLE_WORDS

# (R, MINB, U, FCVT). The first sweep (results/tune, 11:39 UTC) found U = 4 best at one column (8-20%
# faster than U = 0) and little to gain at eight; the second and third tried wider unrolls and
# chunk_isum_f, and two and four columns. This one (banked tables) tries the table copies per lane
# (BankedTab): each format's chosen config with 8, 16 or 32 copies, and a few launch shapes at 32.
ONE_COLUMN = [NewConfig(r, m, u, f) for r, m, u, f in (
    (4, 3, 4, False), (2, 4, 8, False), (2, 3, 8, False), (4, 3, 8, False))]
EIGHT_COLUMNS = [NewConfig(r, m, u, f) for r, m, u, f in ((2, 2, 4, True), (4, 2, 0, True))]
TWO_FOUR_COLUMNS = [NewConfig(r, m, u, f) for r, m, u, f in ((4, 2, 4, False), (2, 2, 4, False))]
BANKS = (8, 16, 32)
TABLE_COPY_BYTES = 32 * 1024  # the most table a block stages: static shared memory ends at 48 KB


def banks_for(fmt: str, banks: int) -> int:
    """The copies a candidate asks for, capped so the copies fit TABLE_COPY_BYTES; 1 for the formats whose
    lookups are broadcasts (iq4: 4 words every lane reads alike) or that have no table."""
    words = TABLE_WORDS[fmt]
    if words <= 4:
        return 1
    while banks > 1 and 4 * words * banks > TABLE_COPY_BYTES:
        banks //= 2
    return banks


ConfigOf = Callable[[str], NewConfig]


def with_banks(base: ConfigOf, banks: int) -> ConfigOf:
    """The config `base` gives a format, with `banks` table copies (capped by banks_for); mmvq_old's passes
    are left alone (they read their table from global memory)."""
    def config_of(fmt: str) -> NewConfig:
        config = base(fmt)
        return config if config.old else replace(config, banks=banks_for(fmt, banks))
    return config_of


def chosen(width: int) -> ConfigOf:
    return lambda fmt: NEW_CONFIGS.get((fmt, width), NewConfig())


def fixed(config: NewConfig) -> ConfigOf:
    return lambda fmt: config


def candidate(label: str, config_for: ConfigOf, width: int) -> Variant:
    """The new kernel with config_for(fmt) for passes of `width` columns, the family's table for the others."""
    def config_of(fmt: str, nc: int) -> NewConfig:
        return config_for(fmt) if nc == width else new_config(fmt, nc)

    def kernels(family, source: str) -> list[str]:
        if source != Mmvq.sources[1]:
            return []
        return sorted({config_for(fmt).kernel(fmt, width) for fmt in FORMATS})

    def launch(family, case, kernels_, dev, outs, stream=None) -> None:
        family.launch_new_passes(case, kernels_, dev, outs, config_of, stream)

    return Variant(label, kernels, launch, f"mmvq_new, {width}-column passes: {label}")


def candidates(width: int, shapes: list[NewConfig]) -> list[Variant]:
    """Each format's chosen config with every count of table copies, then each launch shape with 32."""
    out = [candidate(f"chosen-b{b}", with_banks(chosen(width), b), width) for b in BANKS]
    out += [candidate(f"{c.label}b32", with_banks(fixed(c), 32), width) for c in shapes]
    return out


def tune_family(width: int, shapes: list[NewConfig]) -> type:
    """A family `mmvq_tune<width>`: old, new and the candidates, its bench cases the DRAM shape."""
    def bench_cases(self):
        return [self.case(fmt, 131072, 8192, width, "seed:1") for fmt in FORMATS]

    return type(f"MmvqTune{width}", (Mmvq,), {
        "name": f"mmvq_tune{width}", "bench_cases": bench_cases,
        "description": f"mmvq_new launch candidates for {width}-column passes (scripts/mmvq_tune.py)",
        "variants": (*Mmvq.variants, *candidates(width, shapes))})


TUNE_FAMILIES = [tune_family(w, c) for w, c in ((1, ONE_COLUMN), (2, TWO_FOUR_COLUMNS), (4, TWO_FOUR_COLUMNS),
                                                (8, EIGHT_COLUMNS))]
