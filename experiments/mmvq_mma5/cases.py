"""mmvq_mma5 (issue 37 item 1): mmvq_mma's 8-column tensor-core pass for the five 1-3-bit formats `new` ran on the
CUDA cores (iq1_m, iq2_xs, iq2_s, iq3_xxs, iq3_s), as a --cases file: a family `mmvq_mma5`, the built-in mmvq with
one variant per candidate launch and `new-dp4a` (new's launch before issue 37 promoted the winners), so that parity
checks each bitwise against old and bench times them beside new and old in one run.

    strata-bench compile --arch 90 --cases experiments/mmvq_mma5/cases.py --family mmvq_mma5 --resources
    strata-bench parity --cases experiments/mmvq_mma5/cases.py --family mmvq_mma5
    strata-bench bench --cases experiments/mmvq_mma5/cases.py --family mmvq_mma5 --budget 0.5

A candidate runs mmvq_mma<F, TG, 1, 1> (kernels_src/mmvq/mmvq_mma.cu, included as it is by kernels/mmvq_mma5.cu)
for the 8-column passes of its formats, with F: iq3_xxs and iq3_s their own per-lane MmaFrag (one scale per 32
values: the kernel as it is); iq1_m, iq2_xs and iq2_s (a scale per 16 values) the tags fmt_<format>_k16pair (the
lane pair, mma_frag.cuh's GridPairFrag) or fmt_<format>_k16 (per lane, the control: kernels/mma_frag5.cuh), whose
mma_chunk runs two m16n8k16 mmas a chunk, one per scale. The winners (lane-tg4's iq3_* and pair-tg4) are the
product's since issue 37 (kernels_src/mmvq/mma_frag.cuh, mma_frag_split.cuh; `new` runs them on 8-column passes of
32768 rows and more); the controls stay here. Every other pass runs new's launch, so each variant runs every case.
Only the public kit is used, and the built-in family's extension surface (docs/EXTENDING.md).
"""
from __future__ import annotations

from pathlib import Path

from strata_bench.kit import Variant, builtin_family, compute_major, extend_builtin, shared_optin

Mmvq = builtin_family("mmvq")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "mmvq_mma5.cu"  # in KERNELS
SPLIT = ("iq1_m", "iq2_xs", "iq2_s")  # 8-value grid groups, a scale per 16 values: two k16 mmas a chunk
WORDS = ("iq3_xxs", "iq3_s")  # 4-value grid words, one scale per 32 values: the built-in m16n8k32
FORMATS = (*SPLIT, *WORDS)
WIDTH = 8  # the mma's N: the pass these candidates run
MMA_MAJOR = 8  # mma.sync of int8 needs sm_80 (an older GPU runs new's pass)


class Mma5Config(Mmvq.MmaConfig):
    """mmvq_mma's launch (tile groups, MINB, one weight stage: MmaConfig's shared bytes and threads) with the
    candidate's decoder: `frag` "lane" (iq3_*: the format's own MmaFrag; the split formats: fmt_<format>_k16, this
    folder's control) or "pair" (the split formats only: fmt_<format>_k16pair, the product's since issue 37)."""

    @property
    def label(self) -> str:
        return f"{self.frag}-tg{self.tile_groups}"

    @property
    def formats(self) -> tuple[str, ...]:
        return FORMATS if self.frag == "lane" else SPLIT

    def kernel(self, fmt: str) -> str:
        if fmt in WORDS:
            return Mmvq.MmaConfig(self.tile_groups, 0).kernel(fmt)
        suffix = "k16" if self.frag == "lane" else "k16pair"
        return Mmvq.MmaConfig(self.tile_groups, 0, frag=suffix).kernel(fmt)


# The candidates: per lane at the built-in launch (TG = 4: 16 warps, one block an SM), the lane pair of the split
# formats at TG = 4 and TG = 3 (fewer warps, more registers a thread: the pair's shuffle lengthens each row's chain).
CONFIGS = (Mma5Config(4, 0, frag="lane"), Mma5Config(4, 0, frag="pair"), Mma5Config(3, 0, frag="pair"))


def applies(config: Mma5Config, fmt: str, nc: int, nchunks: int) -> bool:
    """Whether the candidate runs this pass: one of its formats, 8 columns, a GPU with int8 mma whose blocks may
    opt in to the pass's shared memory (activations of 8 columns, the warps' group buffers, the tree operands)."""
    if fmt not in config.formats or nc != WIDTH or compute_major() < MMA_MAJOR:
        return False
    return sum(config.shared_bytes(fmt, nchunks)) <= shared_optin()


def _variant(config: Mma5Config) -> Variant:
    """The candidate's kernels (from OWN_SOURCE) and launch: new's passes, the candidate's mmvq_mma where it applies."""
    def kernels(family, source: str) -> list[str]:
        return [config.kernel(fmt) for fmt in config.formats] if source == OWN_SOURCE else []

    def launch(family, case, kernels, dev, outs, stream=None) -> None:
        family.launch_new_passes(case, kernels, dev, outs, Mmvq.new_config, stream,
                                 mma_of=lambda fmt, nc, nchunks: config if applies(config, fmt, nc, nchunks) else None)

    how = ("per-lane fragment decode (iq3_*: one m16n8k32 a chunk; the others two m16n8k16)" if config.frag == "lane"
           else "lane-pair fragment decode (one shuffle a row, two m16n8k16 a chunk)")
    return Variant(config.label, kernels, launch,
                   f"8-column {', '.join(config.formats)} passes: mmvq_mma TG={config.tile_groups} with the {how}; "
                   "others as new")


VARIANTS = tuple(_variant(c) for c in CONFIGS)


def _dp4a_kernels(family, source: str) -> list[str]:
    return ([Mmvq.new_config(fmt, nc).kernel(fmt, nc) for fmt in FORMATS for nc in (1, 2, 4, 8)]
            if source == Mmvq.sources[1] else [])


def _launch_dp4a(family, case, kernels, dev, outs, stream=None) -> None:
    """new's launch without the tensor cores: `new` as it was before issue 37 made the winners its 8-column pass
    (mmvq_new; H100 131072x8192: iq1_m 318.9 us, iq2_xs 325.6, iq2_s 329.6, iq3_xxs 353.2, iq3_s 379.2), so one
    bench shows both."""
    family.launch_new_passes(case, kernels, dev, outs, Mmvq.new_config, stream)


# The product before the promotion beside the candidates: new's own passes on mmvq_new's kernel (dp4a).
DP4A = Variant("new-dp4a", _dp4a_kernels, _launch_dp4a,
               "new's mmvq_new passes without the tensor cores (new for these five formats before issue 37)")
VARIANTS = (*VARIANTS, DP4A)

# Parity: the 8-column pass and its tails, at 8 and 11 (= 8 + 2 + 1) columns. The built-in SHAPES (8192x2560:
# 10 blocks a row, warps with 3 and 2 groups; 16384x512: 2 blocks, warps 2-3 idle); (37, 2304): 9 blocks, a part
# tile of 5 rows; (24, 4352): 17 blocks, every head of a group in its granule; (1000, 8192): the DRAM shape's K,
# 63 tiles (a last part tile); the edge blocks and the shipped fixture's rows.
PARITY_SHAPES = ((37, 2304), (24, 4352), (1000, 8192))
PARITY_NCOLS = (8, 11)
# Bench: the DRAM shape, and a quarter of it, where the tile groups outnumber an H100's 16-row tiles less (the
# smallest shape measured sets min_rows, as MMA_CONFIGS' iq4_nl and iq4_xs: 32768).
BENCH_SHAPES = ((131072, 8192), (32768, 8192))


class MmvqMma5(extend_builtin("mmvq", OWN_SOURCE, KERNELS, VARIANTS)):
    """The built-in mmvq with this folder's candidates; its cases are the five formats' own."""

    name = "mmvq_mma5"
    description = ("mmvq with tensor-core 8-column passes for iq1_m, iq2_xs, iq2_s (two k16 mmas a chunk), iq3_xxs "
                   "and iq3_s (experiments/mmvq_mma5)")

    def bench_cases(self):
        """Each format at BENCH_SHAPES, 8 columns (the one pass the candidates change)."""
        return [self.case(fmt, rows, cols, WIDTH, "seed:1") for rows, cols in BENCH_SHAPES for fmt in FORMATS]

    def default_cases(self):
        return self.grid_cases(FORMATS, (*Mmvq.SHAPES, *PARITY_SHAPES), PARITY_NCOLS)
