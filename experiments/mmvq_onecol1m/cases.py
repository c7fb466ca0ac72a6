"""mmvq_onecol1m (issue 37): iq1_m's one-column pass on the product's mmvq_onecol kernel with a selector-table
decoder (experiments/mmvq_onecol1m/README.md), as a --cases file: a family `mmvq_onecol1m`, the built-in mmvq
with one variant per candidate, so that parity checks each bitwise against old and bench times them beside new in
one run.

    strata-bench compile --arch 90 --cases experiments/mmvq_onecol1m/cases.py --family mmvq_onecol1m --resources
    strata-bench parity --cases experiments/mmvq_onecol1m/cases.py --family mmvq_onecol1m
    strata-bench bench --cases experiments/mmvq_onecol1m/cases.py --family mmvq_onecol1m --budget 0.5

A variant runs the product's one-column kernel, mmvq_onecol<onecol::Iq1mSel<WIDE>, R, MINB, U> (the decoder in
kernels_src/mmvq/onecol_dec_iq1m.cuh since its promotion, the kernel kernels_src/mmvq/mmvq_onecol.cu), launched as
the product launches it (Mmvq.launch_onecol_pass), for iq1_m's one-column passes of MIN_ROWS rows or more (the product's
onecol rule: the one shape measured is 131072 x 8192); a case it does not touch runs new's launch, and the other
passes of one it touches run new's mmvq_new pass (NEW_CONFIGS). Only the public kit is used (docs/EXTENDING.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from strata_bench.kit import Variant, builtin_family, extend_builtin

Mmvq = builtin_family("mmvq")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "mmvq_onecol1m.cu"  # in KERNELS
FMT = "iq1_m"
MIN_ROWS = 131072  # as the product's ONECOL_CONFIGS: below it nothing says mmvq_onecol is faster
ACT_BYTES = 36  # staged per activation block: 32 bytes of codes (old's order), the scale x 1/8
K_COPIES_BYTES = 2 * 32 * 4  # 32 copies each of K0 and K1 after the selector table

# Parity at 1 and 11 = 8 + 2 + 1 columns (the last pass one column): the built-in SHAPES, (37, 1280): 40 chunks and
# a partial row group, (3, 256): fewer rows than R, (1000, 14336): 14 steps, the edge blocks and the fixture (these
# run new's launch: fewer rows than MIN_ROWS; the host test runs the candidates' decoder on them); then the tall
# ones the candidates run: 131072 x 256, 131077 x 256 (a partial last row group), and the edge blocks at 131072 x 256.
PARITY_SHAPES = ((37, 1280), (3, 256), (1000, 14336))
TALL_SHAPES = ((131072, 256), (131077, 256))
PARITY_NCOLS = (1, 11)
BENCH_SHAPE = (131072, 8192)


class Candidate(NamedTuple):
    """A variant: mmvq_onecol<onecol::Iq1mSel<wide>, rows, min_blocks, unroll> for iq1_m at one column."""

    label: str
    wide: bool
    rows: int
    min_blocks: int
    unroll: int

    @property
    def kernel(self) -> str:
        return f"mmvq_onecol<onecol::Iq1mSel<{str(self.wide).lower()}>, {self.rows}, {self.min_blocks}, {self.unroll}>"

    @property
    def static_bytes(self) -> int:  # 4096 selector entries (the 11-bit index and the delta bit), K0 and K1 copies
        return 4096 * (8 if self.wide else 4) + K_COPIES_BYTES

    def dynamic_bytes(self, nchunks: int) -> int:  # the staged activations
        return nchunks * ACT_BYTES

    def applies(self, fmt: str, nc: int, rows: int) -> bool:
        return fmt == FMT and nc == 1 and rows >= MIN_ROWS


# s64: entries of two selectors (32 KiB), one LDS.64 a group; s32: one selector word (16 KiB), one LDS.32 and a
# shift a group. Both at iq1_s tern's r4m3u4 (the product's one-column iq1_s launch; new's iq1_m is r2m3u8).
CANDIDATES = (Candidate("onecol1m-s64", True, 4, 3, 4), Candidate("onecol1m-s32", False, 4, 3, 4))


def _variant(cand: Candidate) -> Variant:
    def kernels(family, source: str) -> list[str]:
        return [cand.kernel] if source == OWN_SOURCE else []

    def launch(family, case, kernels, dev, outs, stream=None) -> None:
        passes = Mmvq.column_passes(case.ncols)
        if not any(cand.applies(case.fmt, nc, case.rows) for nc in passes):
            family.launch(case, "new", kernels, dev, outs, stream)
            return
        family.quantize_activations(case, kernels, dev, stream)
        col0 = 0
        for nc in passes:
            if cand.applies(case.fmt, nc, case.rows):
                family.launch_onecol_pass(cand, case, kernels, dev, outs, col0, stream)
            else:
                family.launch_new_pass(case, kernels, dev, outs, col0, nc, Mmvq.new_config(case.fmt, nc), stream)
            col0 += nc

    return Variant(cand.label, kernels, launch, f"one-column iq1_m ({MIN_ROWS}+ rows) selector table "
                   f"{'s64' if cand.wide else 's32'} r{cand.rows}m{cand.min_blocks}u{cand.unroll}: mmvq_onecol; "
                   "other passes as new")


VARIANTS = tuple(_variant(c) for c in CANDIDATES)

class MmvqOneCol1m(extend_builtin("mmvq", OWN_SOURCE, KERNELS, VARIANTS)):
    name = "mmvq_onecol1m"
    description = "mmvq with iq1_m's one-column pass on mmvq_onecol with a selector table (experiments/mmvq_onecol1m)"

    def default_cases(self):
        tall = [self.case(FMT, rows, cols, n, "seed:1") for rows, cols in TALL_SHAPES for n in PARITY_NCOLS]
        tall += [self.case(FMT, *TALL_SHAPES[0], n, "edge:2") for n in PARITY_NCOLS]
        return self.grid_cases((FMT,), (*Mmvq.SHAPES, *PARITY_SHAPES), PARITY_NCOLS) + tall

    def bench_cases(self):
        return [self.case(FMT, *BENCH_SHAPE, 1, "seed:1")]
