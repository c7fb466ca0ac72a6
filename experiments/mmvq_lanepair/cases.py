"""mmvq_lanepair (issue 28, candidate (b)): mmvq_mma's 8-column pass of iq1_s and iq2_xxs with a lane-pair fragment
decode (since issue 37 the product's: kernels_src/mmvq/mma_frag.cuh, run by `new` on tall 8-column passes), as a --cases
file: a family `mmvq_lanepair`, the built-in mmvq with one variant per candidate launch and `new-dp4a` (new's
launch before issue 37), so that parity checks each bitwise against old and bench times them beside new in one
run.

    strata-bench compile --arch 90 --cases experiments/mmvq_lanepair/cases.py --family mmvq_lanepair --resources
    strata-bench parity --cases experiments/mmvq_lanepair/cases.py --family mmvq_lanepair
    strata-bench bench --cases experiments/mmvq_lanepair/cases.py --family mmvq_lanepair --budget 0.3

A candidate runs the built-in kernel mmvq_mma<F, TG, MINB, 1> (kernels_src/mmvq/mmvq_mma.cu, included as it is
by kernels/mmvq_lanepair.cu) for the 8-column passes of iq1_s and iq2_xxs, with F fmt_<format>_pair (lanes t
and t ^ 1 of a row share their group selectors through one shuffle; both are the product's since issue 37:
`new` runs pair-tg4 for 8-column passes of 131072 rows and more) or this folder's
fmt_<format>_lane (the control: each lane computes both groups' selectors itself). Every other pass runs new's
launch, so each variant runs every case. Only the public kit is used, and the built-in family's extension surface
(docs/EXTENDING.md).
"""
from __future__ import annotations

from pathlib import Path

from strata_bench.kit import Variant, builtin_family, compute_major, extend_builtin, shared_optin

Mmvq = builtin_family("mmvq")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "mmvq_lanepair.cu"  # in KERNELS
# iq1_s and iq2_xxs: the product's pair since issue 37 (their candidates stay for the record: iq2_xxs's pair-tg4
# measured 268.5 us against new's 304.3 before it was promoted). The other 1-3-bit formats are not candidates:
# iq1_m, iq2_xs and iq2_s have a scale per 16
# values (mmvq_mma's C is a whole 32-value chunk's integer), and iq3_xxs / iq3_s look each 4-value word up by
# itself, so a pair would share only the sign work (docs/PERF_NOTES.md v10).
FORMATS = ("iq1_s", "iq2_xxs")
WIDTH = 8  # the mma's N: the pass these candidates run
MMA_MAJOR = 8  # mma.sync m16n8k32 of int8 needs sm_80 (an older GPU runs new's pass)


class PairConfig(Mmvq.MmaConfig):
    """mmvq_mma's launch (tile groups, MINB, one weight stage: MmaConfig's shared bytes and threads) with the
    fragment decoder `frag`: "pair" (since issue 37 the product's, kernels_src/mmvq/mma_frag.cuh) or "lane", the
    control (fmt_<format>_lane, kernels/mma_frag_lane.cuh)."""

    @property
    def label(self) -> str:
        return f"{self.frag}-tg{self.tile_groups}"


# The candidates: the lane pair at mmvq_mma's iq1_s launch (TG = 4: 16 warps, one block an SM; the product's
# default for tall 8-column iq1_s and iq2_xxs passes since issue 37), the same at TG = 3 (fewer warps, more registers a
# thread), and the control (each lane decodes both groups: mmvq_mma's per-lane work, the same code without the
# shuffle), so that one run separates the exchange from the rest.
CONFIGS = (PairConfig(4, 0, frag="pair"), PairConfig(3, 0, frag="pair"), PairConfig(4, 0, frag="lane"))


def applies(config: PairConfig, fmt: str, nc: int, nchunks: int) -> bool:
    """Whether the candidate runs this pass: a format of FORMATS, 8 columns, a GPU with int8 mma whose blocks may
    opt in to the pass's shared memory (activations of 8 columns, the warps' group buffers, the tree operands)."""
    if fmt not in FORMATS or nc != WIDTH or compute_major() < MMA_MAJOR:
        return False
    return sum(config.shared_bytes(fmt, nchunks)) <= shared_optin()


def _kernels(config: PairConfig):
    def kernels(family, source: str) -> list[str]:
        return [config.kernel(fmt) for fmt in FORMATS] if source == OWN_SOURCE else []
    return kernels


def _launch(config: PairConfig):
    def launch(family, case, kernels, dev, outs, stream=None) -> None:
        """Quantize, then per column pass: the candidate's mmvq_mma where it applies, else new's pass."""
        family.quantize_activations(case, kernels, dev, stream)
        col0 = 0
        for nc in Mmvq.column_passes(case.ncols):
            if applies(config, case.fmt, nc, case.cols // 32):
                family.launch_mma_pass(config, case, kernels, dev, outs, col0, stream)
            else:
                family.launch_new_pass(case, kernels, dev, outs, col0, nc, Mmvq.new_config(case.fmt, nc), stream)
            col0 += nc
    return launch


VARIANTS = tuple(
    Variant(c.label, _kernels(c), _launch(c),
            f"8-column iq1_s and iq2_xxs passes: mmvq_mma TG={c.tile_groups} with the "
            + ("lane-pair fragment decode (one shuffle a row)" if c.frag == "pair" else
               "per-lane fragment decode (the control)") + "; others as new")
    for c in CONFIGS)


def _dp4a_kernels(family, source: str) -> list[str]:
    return ([Mmvq.new_config(fmt, nc).kernel(fmt, nc) for fmt in FORMATS for nc in (1, 2, 4, 8)]
            if source == Mmvq.sources[1] else [])


def _launch_dp4a(family, case, kernels, dev, outs, stream=None) -> None:
    """new's launch without the tensor cores: `new` as it was before issue 37 made pair-tg4 its 8-column pass
    (mmvq_new; iq1_s 284.3 us, iq2_xxs 304.3 at 131072x8192 on the H200), so one bench shows both."""
    family.launch_new_passes(case, kernels, dev, outs, Mmvq.new_config, stream)


# Today's product beside the candidates: new's own passes on mmvq_new's kernel (dp4a).
DP4A = Variant("new-dp4a", _dp4a_kernels, _launch_dp4a,
               "new's mmvq_new passes without the tensor cores (new for iq1_s and iq2_xxs before issue 37)")
VARIANTS = (*VARIANTS, DP4A)

# Parity: the 8-column pass and its tails, at 8 and 11 (= 8 + 2 + 1) columns. The built-in SHAPES (8192x2560:
# 10 blocks a row, warps with 3 and 2 groups; 16384x512: 2 blocks, warps 2-3 idle); (37, 2304): 9 blocks, a
# part tile of 5 rows; (24, 4352): 17 blocks, every head of a group in its granule; (1000, 8192): the DRAM
# shape's K, 63 tiles (a last part tile); the edge blocks and the shipped fixture's rows.
PARITY_SHAPES = ((37, 2304), (24, 4352), (1000, 8192))
PARITY_NCOLS = (8, 11)
BENCH_SHAPE = (131072, 8192)  # PEER.md's DRAM shape, where the 2.5x target is set


class MmvqLanepair(extend_builtin("mmvq", OWN_SOURCE, KERNELS, VARIANTS)):
    name = "mmvq_lanepair"
    description = ("mmvq with a lane-pair fragment decode for iq1_s's and iq2_xxs's 8-column mma passes "
                   "(experiments/mmvq_lanepair)")

    def default_cases(self):
        return self.grid_cases(FORMATS, (*Mmvq.SHAPES, *PARITY_SHAPES), PARITY_NCOLS)

    def bench_cases(self):
        return [self.case(fmt, *BENCH_SHAPE, WIDTH, "seed:1") for fmt in FORMATS]
