"""mmvq_onecol3 (issue 37, item 3, third round): iq3_xxs's one-column pass with iq2_xxs's mul7 sign decode
(docs/PERF_NOTES.md v15), as a --cases file: a family `mmvq_onecol3`, the built-in mmvq with one variant per
candidate, so that parity checks each bitwise against old and bench times them beside new in one run.

    strata-bench compile --arch 90 --cases experiments/mmvq_onecol3/cases.py --family mmvq_onecol3 --resources
    strata-bench parity --cases experiments/mmvq_onecol3/cases.py --family mmvq_onecol3
    strata-bench bench --cases experiments/mmvq_onecol3/cases.py --family mmvq_onecol3 --budget 0.5

A variant runs the product's one-column kernel, mmvq_onecol<onecol::Iq3xxsMul7<N>, R, MINB, U> (kernels/: the
decoder in onecol3_dec.cuh, the kernel included from kernels_src/mmvq/mmvq_onecol.cu), launched as the product
launches it (Mmvq.launch_onecol_pass), for iq3_xxs's one-column passes and new's launch for every other pass. Only the
public kit is used (docs/EXTENDING.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from strata_bench.kit import Variant, builtin_family, extend_builtin

Mmvq = builtin_family("mmvq")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "mmvq_onecol3.cu"  # in KERNELS
FMT = "iq3_xxs"
ACT_BYTES = 36  # staged per activation block: 32 bytes of codes (mul7's order), the scale x 1/4


class Candidate(NamedTuple):
    """A variant: mmvq_onecol<onecol::Iq3xxsMul7<copies>, rows, min_blocks, unroll> for iq3_xxs at one column."""

    label: str
    copies: int
    rows: int
    min_blocks: int
    unroll: int

    @property
    def kernel(self) -> str:
        return f"mmvq_onecol<onecol::Iq3xxsMul7<{self.copies}>, {self.rows}, {self.min_blocks}, {self.unroll}>"

    @property
    def static_bytes(self) -> int:  # the restaged grid: 256 entries of 8 bytes, in `copies` copies
        return 256 * 8 * self.copies

    def dynamic_bytes(self, nchunks: int) -> int:  # the staged activations
        return nchunks * ACT_BYTES


# m: one copy of the 2 KiB restaged grid at new's iq3_xxs R and MINB (r4m3; u2: u4 spills 4 bytes at 80
# registers); m16: the same with 16 copies (32 KiB), as new's masked-split-rep16 reads its grid (lookups at most
# 2-way conflicted); m2: one copy at r2m4u4 (mul7's iq2_xxs shape, 64 registers). None spills (NVRTC 13.0 and 13.5).
CANDIDATES = (Candidate("onecol3-m", 1, 4, 3, 2), Candidate("onecol3-m16", 16, 4, 3, 2),
              Candidate("onecol3-m2", 1, 2, 4, 4))


def _variant(cand: Candidate) -> Variant:
    def kernels(family, source: str) -> list[str]:
        return [cand.kernel] if source == OWN_SOURCE else []

    def launch(family, case, kernels, dev, outs, stream=None) -> None:
        family.quantize_activations(case, kernels, dev, stream)
        col0 = 0
        for nc in Mmvq.column_passes(case.ncols):
            if nc == 1 and case.fmt == FMT:
                family.launch_onecol_pass(cand, case, kernels, dev, outs, col0, stream)
            else:
                family.launch_new_pass(case, kernels, dev, outs, col0, nc, Mmvq.new_config(case.fmt, nc), stream)
            col0 += nc

    return Variant(cand.label, kernels, launch, f"one-column iq3_xxs mul7 x{cand.copies} r{cand.rows}"
                   f"m{cand.min_blocks}u{cand.unroll}: mmvq_onecol; other passes as new")


VARIANTS = tuple(_variant(c) for c in CANDIDATES)

# Parity at 1 and 11 = 8 + 2 + 1 columns (the last pass one column): the built-in SHAPES, (37, 1280): 40 chunks and a
# partial row group, (3, 256): fewer rows than R, (1000, 14336): 14 steps (the unrolled loop and its remainder);
# the edge blocks and the fixture.
PARITY_SHAPES = ((37, 1280), (3, 256), (1000, 14336))
PARITY_NCOLS = (1, 11)
BENCH_SHAPE = (131072, 8192)


class MmvqOneCol3(extend_builtin("mmvq", OWN_SOURCE, KERNELS, VARIANTS)):
    name = "mmvq_onecol3"
    description = "mmvq with iq3_xxs's one-column pass on mul7's sign decode (experiments/mmvq_onecol3)"

    def default_cases(self):
        return self.grid_cases((FMT,), (*Mmvq.SHAPES, *PARITY_SHAPES), PARITY_NCOLS)

    def bench_cases(self):
        return [self.case(FMT, *BENCH_SHAPE, 1, "seed:1")]
