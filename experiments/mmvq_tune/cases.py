"""Launch-tuning candidates of mmvq's `new` (the experiment that chose families/mmvq.py's NEW_CONFIGS and
DECODERS), as a --cases file: families whose variant tables hold old, new and one variant per candidate
config (rows per warp R, blocks per SM MINB, chunk-loop unroll U, FCVT, decoder), so the project's own bench
times them all in one run, each checked bitwise against old before it is timed.

    strata-bench bench --cases experiments/mmvq_tune/cases.py --family mmvq_tune1 --shape 131072x8192 --cols 1
    strata-bench bench --cases experiments/mmvq_tune/cases.py --family mmvq_tune8 --shape 131072x8192 --cols 8
    strata-bench bench --cases experiments/mmvq_tune/cases.py --family mmvq_tune_decoders1  # the decoders
    strata-bench bench --cases experiments/mmvq_tune/cases.py --family mmvq_tune_rep1       # iq3 table copies

`mmvq_tune<W>` holds the candidates for passes of W = 1, 2, 4 and 8 columns; a candidate launches its
config for its own pass width and the family's table for any other. The candidates are configs that did
not spill registers for most formats under ptxas -v (CUDA 13, sm_90); docs/PERF_NOTES.md has the figures,
README.md beside this file the story. Every candidate is another template instance of the built-in
mmvq_new (kernels_src/mmvq/mmvq.cu, common/decoders.cuh), so this experiment has no kernels of its own.
Only the public kit is used (strata_bench.kit; Mmvq's extension surface: docs/EXTENDING.md).
"""
from __future__ import annotations

from strata_bench.kit import KERNEL_FORMATS, Variant, builtin_family

Mmvq = builtin_family("mmvq")
NewConfig, Decoder = Mmvq.NewConfig, Mmvq.Decoder
MMVQ_SOURCE = "mmvq/mmvq.cu"  # the built-in source of mmvq_old and mmvq_new

# The decoders the sweeps measured (docs/PERF_NOTES.md v5 and v7): the built-in ones (Mmvq.DECODERS: lean,
# masked-rep16, masked-split-rep16) and the candidates `new` does not run.
REP_COPIES = (8, 16, 32)  # the table copies of the replicated decoders
DECODERS: dict = {**Mmvq.DECODERS, **{d.name: d for d in (
    # grid magnitudes and byte masks; the signs through the dp4a chain (sum w q - 2 sum (w & m) q)
    Decoder("masked", "siq::sign_masked<{traits}>", ("iq3_xxs", "iq3_s")),
    # masked, both sums as two chains of half the length each
    Decoder("masked-split", "siq::sign_masked<{traits}, true>", ("iq3_xxs", "iq3_s")),
    # masked and masked-split reading N interleaved table copies, lane l copy l % N: bank conflicts at most
    # 32 / N-way. iq3_s has no 32-copy form: its 512 words x 32 (64 KiB) exceed the 48 KiB of static
    # shared memory a kernel may declare.
    *(Decoder(f"{base}-rep{n}", f"siq::sign_masked_rep<{{traits}}, {split}, {n}>",
              ("iq3_xxs", "iq3_s") if n < 32 else ("iq3_xxs",), n)
      for base, split in (("masked", "false"), ("masked-split", "true")) for n in REP_COPIES
      if f"{base}-rep{n}" not in Mmvq.DECODERS),
)}}

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


# The decoders at one column (docs/PERF_NOTES.md v5), each at the shapes its formats won with and their
# neighbours, beside the format's own decoder at those shapes. The shapes that spill under NVRTC 13.5 (iq3_s
# masked r2m4u4 split or r4m3u8, r2m5u4, r1m5u8) are not candidates.
DECODER_SHAPES = {"masked": ((4, 3, 4), (4, 3, 2), (2, 4, 2), (4, 2, 4)),
                  "masked-split": ((4, 3, 4), (4, 3, 2), (4, 2, 4)),
                  "lean": ((2, 4, 8), (4, 3, 4), (2, 4, 4))}
DECODER_FORMATS = tuple(dict.fromkeys(f for name in DECODER_SHAPES for f in DECODERS[name].formats))
PLAIN_SHAPES = ((4, 3, 4), (4, 3, 2), (2, 4, 2), (2, 4, 8))


def candidate(config, width: int, formats: tuple[str, ...] = KERNEL_FORMATS) -> Variant:
    """The new kernel with `config` for passes of `width` columns of `formats`, the family's table for the
    others (Mmvq.launch_new_passes, without the tensor-core passes: a candidate times its own config)."""
    def config_of(fmt: str, nc: int):
        return config if nc == width and fmt in formats else Mmvq.new_config(fmt, nc)

    def kernels(family, source: str) -> list[str]:
        if source != MMVQ_SOURCE:
            return []
        return [config.kernel(fmt, width) for fmt in formats]

    def launch(family, case, kernels_, dev, outs, stream=None) -> None:
        family.launch_new_passes(case, kernels_, dev, outs, config_of, stream)

    return Variant(config.label, kernels, launch, f"mmvq_new, {width}-column passes as {config}")


def decoder_candidates() -> list[tuple]:
    """The one-column decoder candidates with the formats each exists for; the plain shapes for all of them."""
    plain = [(NewConfig(r, m, u), DECODER_FORMATS) for r, m, u in PLAIN_SHAPES]
    return plain + [(NewConfig(r, m, u, decoder=DECODERS[name]), DECODERS[name].formats)
                    for name, shapes in DECODER_SHAPES.items() for r, m, u in shapes]


def tune_family(width: int, configs: list[tuple], formats: tuple[str, ...] = KERNEL_FORMATS, tag: str = "") -> type:
    """A family `mmvq_tune<tag><width>`: old, new and one candidate per (config, its formats), its bench cases
    the DRAM shape in `formats`."""
    def bench_cases(self):
        return [self.case(fmt, 131072, 8192, width, "seed:1") for fmt in formats]

    return type(f"MmvqTune{tag.title()}{width}", (Mmvq,), {
        "name": f"mmvq_tune{tag}{width}", "bench_cases": bench_cases,
        "description": f"mmvq_new launch candidates for {width}-column passes (experiments/mmvq_tune)",
        "variants": (*Mmvq.variants, *(candidate(c, width, f) for c, f in configs))})


TUNE_FAMILIES = [tune_family(w, [(c, KERNEL_FORMATS) for c in cs]) for w, cs in (
    (1, ONE_COLUMN), (2, TWO_FOUR_COLUMNS), (4, TWO_FOUR_COLUMNS), (8, EIGHT_COLUMNS))]
TUNE_FAMILIES.append(tune_family(1, decoder_candidates(), DECODER_FORMATS, "_decoders"))


# The replicated-table decoders (masked[-split]-rep<N>: lane l reads copy l % N of the iq3 grid, at most
# 32 / N-way bank conflicts) at the iq3 one-column winners' shapes and a neighbour, beside the unreplicated
# decoder at the same shapes (the baselines; "new" is the tuned table itself). At eight columns the
# r2m2u0 shape with each decoder. iq3_s has no 32-copy form.
REP_FORMATS = ("iq3_xxs", "iq3_s")
REP_SHAPES = {1: ((4, 3, 4), (4, 3, 2), (2, 4, 2)), 8: ((2, 2, 0),)}
# (decoder, shape) -> formats whose kernel spills under NVRTC 13.5 (compile --resources): not candidates.
# iq3_s masked-split at r4m3u4 spills without copies too; the masked decoders at r4m2u0 (the eight-column
# default shape) spill for both formats, with or without copies.
REP_SPILLS = {**{(f"masked-split{t}", (4, 3, 4)): ("iq3_s",) for t in ("", "-rep8", "-rep16")},
              ("masked-split-rep8", (4, 3, 2)): ("iq3_xxs",), ("masked-split-rep16", (4, 3, 2)): ("iq3_s",)}


def rep_candidates(width: int) -> list[tuple]:
    """Per shape of REP_SHAPES[width]: masked and masked-split, then each with 8, 16 and 32 copies."""
    names = [f"{base}{tail}" for base in ("masked", "masked-split")
             for tail in ("", *(f"-rep{n}" for n in REP_COPIES))]
    picks = [(NewConfig(r, m, u, decoder=DECODERS[name]),
              tuple(f for f in DECODERS[name].formats if f not in REP_SPILLS.get((name, (r, m, u)), ())))
             for r, m, u in REP_SHAPES[width] for name in names]
    return [(config, formats) for config, formats in picks if formats]


TUNE_FAMILIES += [tune_family(w, rep_candidates(w), REP_FORMATS, "_rep") for w in (1, 8)]
