"""Launch-tuning candidates of mmvq_new, as a --cases file: families whose variant tables hold old, new and
one variant per candidate config (rows per warp R, blocks per SM MINB, chunk-loop unroll U, FCVT), so the
project's own bench times them all in one run, each checked bitwise against old before it is timed.

    strata-bench bench --cases scripts/mmvq_tune.py --family mmvq_tune1 --shape 131072x8192 --cols 1
    strata-bench bench --cases scripts/mmvq_tune.py --family mmvq_tune8 --shape 131072x8192 --cols 8
    strata-bench bench --cases scripts/mmvq_tune.py --family mmvq_tune_masks1   # iq3_xxs, iq3_s decoders

`mmvq_tune<W>` holds the candidates for passes of W = 1, 2, 4 and 8 columns; a candidate launches its
config for its own pass width and the family's table for any other. The candidates are configs that did
not spill registers for most formats under ptxas -v (CUDA 13, sm_90); docs/PERF_NOTES.md has the figures.
The winners go into families/mmvq.py's NEW_CONFIGS.
"""
from __future__ import annotations

from strata_bench.cases.family import Variant
from strata_bench.families.mmvq import FORMATS, SIGN_MASK_FORMATS, Mmvq, NewConfig, new_config

# (R, MINB, U, FCVT). The first sweep (results/tune, 11:39 UTC) found U = 4 best at one column (8-20%
# faster than U = 0) and little to gain at eight; the second tried wider unrolls and chunk_isum_f, the third
# two and four columns. Three later sweeps (docs/PERF_NOTES.md, v4) tried table copies per lane, staged sign
# words and the smallest shared-memory carveout: none was faster, so none is a candidate here.
ONE_COLUMN = [NewConfig(r, m, u, f) for r, m, u, f in (
    (4, 3, 4, False), (4, 3, 4, True), (2, 4, 4, False), (2, 4, 4, True), (2, 4, 2, False), (2, 4, 2, True),
    (2, 4, 8, False), (4, 3, 8, False), (2, 3, 4, False), (2, 3, 8, False), (1, 4, 8, False), (4, 2, 4, False),
    (4, 2, 8, False), (8, 2, 4, False), (4, 4, 4, False), (1, 5, 8, False))]
EIGHT_COLUMNS = [NewConfig(r, m, u, f) for r, m, u, f in (
    (4, 2, 0, True), (2, 2, 2, False), (2, 2, 2, True), (2, 2, 0, True), (4, 2, 2, True), (2, 2, 4, True),
    (4, 1, 0, True), (2, 1, 2, True))]
# Two and four columns (third sweep): the one- and eight-column winners' shapes.
TWO_FOUR_COLUMNS = [NewConfig(r, m, u, f) for r, m, u, f in (
    (4, 2, 0, False), (2, 2, 0, False), (2, 3, 0, False), (2, 2, 2, False), (2, 2, 4, False), (2, 3, 4, False),
    (2, 3, 2, False), (4, 2, 2, False), (4, 2, 4, False), (2, 2, 4, True), (4, 2, 4, True), (2, 3, 4, True))]


# The sign-mask decoders (iq3_xxs, iq3_s: signs through the dot, fewer integer-ALU instructions a chunk,
# docs/PERF_NOTES.md v5) at the one-column winners' shapes and their neighbours, and at two columns;
# r4m3u8 (iq3_s), r4m2u4 (both, two columns), r2m5u4 and r1m5u8 spill under NVRTC 13.5: not candidates.
MASKED = {1: [NewConfig(r, m, u, f, masks=True) for r, m, u, f in (
    (4, 3, 4, False), (4, 3, 4, True), (2, 4, 4, False), (2, 4, 2, False), (2, 4, 8, False), (2, 3, 4, False),
    (2, 3, 8, False), (4, 3, 2, False), (2, 4, 4, True), (4, 2, 4, False), (4, 2, 8, False), (8, 2, 2, False),
    (8, 2, 4, False))],
    2: [NewConfig(r, m, u, f, masks=True) for r, m, u, f in (
        (4, 2, 2, False), (2, 3, 4, False), (2, 2, 4, False), (4, 2, 2, True))]}


def candidate(config: NewConfig, width: int, formats: tuple[str, ...] = FORMATS) -> Variant:
    """The new kernel with `config` for passes of `width` columns of `formats`, the family's table for the
    others."""
    def config_of(fmt: str, nc: int) -> NewConfig:
        return config if nc == width and fmt in formats else new_config(fmt, nc)

    def kernels(family, source: str) -> list[str]:
        if source != Mmvq.sources[1]:
            return []
        return [config.kernel(fmt, width) for fmt in formats]

    def launch(family, case, kernels_, dev, outs, stream=None) -> None:
        family.launch_new_passes(case, kernels_, dev, outs, config_of, stream)

    return Variant(config.label, kernels, launch, f"mmvq_new, {width}-column passes as {config}")


def tune_family(width: int, configs: list[NewConfig], formats: tuple[str, ...] = FORMATS, tag: str = "") -> type:
    """A family `mmvq_tune<tag><width>`: old, new and one candidate per config, its bench cases the DRAM
    shape in `formats`."""
    def bench_cases(self):
        return [self.case(fmt, 131072, 8192, width, "seed:1") for fmt in formats]

    return type(f"MmvqTune{tag.title()}{width}", (Mmvq,), {
        "name": f"mmvq_tune{tag}{width}", "bench_cases": bench_cases,
        "description": f"mmvq_new launch candidates for {width}-column passes (scripts/mmvq_tune.py)",
        "variants": (*Mmvq.variants, *(candidate(c, width, formats) for c in configs))})


TUNE_FAMILIES = [tune_family(w, c) for w, c in ((1, ONE_COLUMN), (2, TWO_FOUR_COLUMNS), (4, TWO_FOUR_COLUMNS),
                                                (8, EIGHT_COLUMNS))]
TUNE_FAMILIES += [tune_family(w, c, SIGN_MASK_FORMATS, "_masks") for w, c in MASKED.items()]
