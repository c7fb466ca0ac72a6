"""mmvq_onecol (issue 37, item 3): a one-column mat-vec for iq2_xxs and iq1_s that issues fewer instructions per
weight than mmvq_new's one-column pass (kernels/mmvq_onecol.cu, decoders in kernels/onecol_dec.cuh), as a --cases
file: a family `mmvq_onecol`, the built-in mmvq with one variant per candidate, so that parity checks each bitwise
against old and bench times them beside new in one run; nothing built-in changes.

    strata-bench compile --arch 90 --cases experiments/mmvq_onecol/cases.py --family mmvq_onecol --resources
    strata-bench parity --cases experiments/mmvq_onecol/cases.py --family mmvq_onecol
    strata-bench bench --cases experiments/mmvq_onecol/cases.py --family mmvq_onecol --budget 0.5

A variant runs mmvq_onecol<D, R, MINB, U> for the one-column passes of the formats it names (D: a decoder of
onecol_dec.cuh) and new's launch for every other pass, so each variant runs every case. Only the public kit is
used, and the built-in family's extension surface (docs/EXTENDING.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from strata_bench.kit import Variant, builtin_family, extend_builtin

Mmvq = builtin_family("mmvq")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "mmvq_onecol.cu"  # in KERNELS
FORMATS = ("iq2_xxs", "iq1_s")


class Decoder(NamedTuple):  # not a dataclass: a --cases file's module is not in sys.modules
    """A decoder of onecol_dec.cuh: its C++ type, the words of its static shared tables (SHARED_WORDS) and the
    bytes it stages per activation block (32 of codes, then the scale, and with CODE_SUM the code sum)."""

    expression: str
    shared_words: int
    act_bytes: int


# iq2_xxs: the grid's 256 nibble words, the sign table (128 x copies), 32 copies of K0 (mul7: of its PRMT source A);
# iq1_s: 2048 nibble words, or the 2048 x 2 words of positive-delta weight bytes, or (tern) 2048 u16 selectors and
# 32 copies each of A_LO and A_HI (bytes and tern stage the code sum: 8 bytes a block after the codes).
DECODERS = {
    "iq2_xxs:arith": Decoder("onecol::Iq2xxsOneCol<false>", 256 + 32, 36),
    "iq2_xxs:stab1": Decoder("onecol::Iq2xxsOneCol<true>", 256 + 128 + 32, 36),
    "iq2_xxs:stab16": Decoder("onecol::Iq2xxsOneCol<true, 16>", 256 + 2048 + 32, 36),
    "iq1_s:nib": Decoder("onecol::Iq1sOneCol<false>", 2048, 36),
    "iq1_s:bytes": Decoder("onecol::Iq1sOneCol<true>", 4096, 40),
    "iq2_xxs:mul7": Decoder("onecol::Iq2xxsMul7", 256 + 32, 36),
    "iq1_s:tern": Decoder("onecol::Iq1sTern", 1024 + 64, 40),
    "iq2_xxs:mul7w": Decoder("onecol::Iq2xxsMul7W", 256 + 32, 36),
}


class Launch(NamedTuple):
    """mmvq_onecol<D, R, MINB, U> for one format: decoder (a DECODERS key), R rows a warp, MINB blocks an SM
    (__launch_bounds__), the step loop's unroll U."""

    decoder: str
    rows: int
    min_blocks: int
    unroll: int

    @property
    def kernel(self) -> str:
        return f"mmvq_onecol<{DECODERS[self.decoder].expression}, {self.rows}, {self.min_blocks}, {self.unroll}>"

    def dynamic_bytes(self, nchunks: int) -> int:
        return nchunks * DECODERS[self.decoder].act_bytes

    @property
    def static_bytes(self) -> int:
        return 4 * DECODERS[self.decoder].shared_words


class OneColConfig(NamedTuple):
    """A candidate: its label and the launch of each format whose one-column pass it runs."""

    label: str
    launches: tuple  # ((fmt, Launch), ...)

    def launch(self, fmt: str) -> Launch | None:
        return dict(self.launches).get(fmt)


# The candidates (docs/PERF_NOTES.md v12 has their SASS counts and the prediction): `t` reads the added tables
# (iq2_xxs's sign selectors, one copy; iq1_s's 16 KiB of weight bytes), `t16` the sign table in 16 copies (bank
# conflicts at most 2-way), `a` adds no shared-memory load (iq2_xxs's arithmetic selector; iq1_s's nibble table
# with K0 or K1 chosen once a chunk): it separates the restructured loop from the tables. Shapes: the fastest of
# R 2-4, MINB 3-4, U 4-8 in instructions a chunk without spills (NVRTC 13.5).
# `m` and `m2` (docs/PERF_NOTES.md v13) add no shared-memory load and no table either: iq2_xxs's sign selectors by
# one multiply a group (mul7), iq1_s's two ternary values a selector nibble (tern: no shift for the high PRMT, a
# 4 KiB u16 table in place of the 8 KiB nibble table); `m` at the controls' shapes, `m2` at new's iq2_xxs shape
# (r2m4u8) and t's iq1_s shape. `w`: m's iq2_xxs with the code words by two 8-byte loads in place of three 4-byte
# ones (one weight load a row-chunk fewer, three SELs more): the L1 model and the issue model predict opposite signs.
CONFIGS = (
    OneColConfig("onecol-t", (("iq2_xxs", Launch("iq2_xxs:stab1", 2, 4, 4)),
                              ("iq1_s", Launch("iq1_s:bytes", 2, 4, 8)))),
    OneColConfig("onecol-t16", (("iq2_xxs", Launch("iq2_xxs:stab16", 2, 4, 4)),)),
    OneColConfig("onecol-a", (("iq2_xxs", Launch("iq2_xxs:arith", 2, 4, 4)),
                              ("iq1_s", Launch("iq1_s:nib", 4, 3, 4)))),
    OneColConfig("onecol-m", (("iq2_xxs", Launch("iq2_xxs:mul7", 2, 4, 4)), ("iq1_s", Launch("iq1_s:tern", 4, 3, 4)))),
    OneColConfig("onecol-m2", (("iq2_xxs", Launch("iq2_xxs:mul7", 2, 4, 8)), ("iq1_s", Launch("iq1_s:tern", 2, 4, 8)))),
    OneColConfig("onecol-w", (("iq2_xxs", Launch("iq2_xxs:mul7w", 2, 4, 4)),)),
)


def _kernels(config: OneColConfig):
    def kernels(family, source: str) -> list[str]:
        return [launch.kernel for _fmt, launch in config.launches] if source == OWN_SOURCE else []
    return kernels


def _launch(config: OneColConfig):
    def launch(family, case, kernels, dev, outs, stream=None) -> None:
        """Quantize, then per column pass: mmvq_onecol for a one-column pass of the config's formats (the product's
        launch of it, on mmvq_new's grid), else mmvq_new's pass as NEW_CONFIGS says."""
        family.quantize_activations(case, kernels, dev, stream)
        col0 = 0
        for nc in Mmvq.column_passes(case.ncols):
            own = config.launch(case.fmt) if nc == 1 else None
            if own is not None:
                family.launch_onecol_pass(own, case, kernels, dev, outs, col0, stream)
            else:
                family.launch_new_pass(case, kernels, dev, outs, col0, nc, Mmvq.new_config(case.fmt, nc), stream)
            col0 += nc
    return launch


def _mmvq_new_kernels(family, source: str) -> list[str]:
    return ([Mmvq.new_config(fmt, nc).kernel(fmt, nc) for fmt in FORMATS for nc in (1, 2, 4, 8)]
            if source == Mmvq.sources[1] else [])


def _launch_mmvq_new(family, case, kernels, dev, outs, stream=None) -> None:
    """new's launch without mmvq_onecol: `new` as it was before onecol-m's launches became its tall one-column
    passes (mmvq_new: iq2_xxs 137.17 us, iq1_s 111.13 at 131072x8192 on the H100), so one bench shows both."""
    family.launch_new_passes(case, kernels, dev, outs, Mmvq.new_config, stream)


VARIANTS = (*(
    Variant(c.label, _kernels(c), _launch(c),
            "one-column " + ", ".join(f"{fmt} {launch.decoder.split(':')[1]} r{launch.rows}m{launch.min_blocks}"
                                      f"u{launch.unroll}" for fmt, launch in c.launches)
            + " passes: mmvq_onecol; others as new")
    for c in CONFIGS), Variant("new-mmvq_new", _mmvq_new_kernels, _launch_mmvq_new,
                               "new's passes on mmvq_new (new for one-column iq2_xxs and iq1_s before onecol-m moved "
                               "into the product)"))

# Parity: tails of every kind at one column (and 11 = 8 + 2 + 1, whose last pass is one column).
# (37, 1280): 40 chunks (lanes 8-31 one step fewer) and a last partial row group; (3, 256): fewer rows than a
# warp's R, one block (lanes 8-31 idle); (1000, 14336): 448 chunks, 14 steps (the unrolled loop and its remainder);
# the built-in SHAPES (8192x2560: 80 chunks; 16384x512: 16 chunks), the edge blocks and the fixture.
PARITY_SHAPES = ((37, 1280), (3, 256), (1000, 14336))
PARITY_NCOLS = (1, 11)
BENCH_SHAPE = (131072, 8192)  # PEER.md's DRAM shape, where issue 37's one-column figures are set


class MmvqOneCol(extend_builtin("mmvq", OWN_SOURCE, KERNELS, VARIANTS)):
    name = "mmvq_onecol"
    description = ("mmvq with fewer instructions a weight for the one-column iq2_xxs and iq1_s passes "
                   "(experiments/mmvq_onecol)")

    def default_cases(self):
        return self.grid_cases(FORMATS, (*Mmvq.SHAPES, *PARITY_SHAPES), PARITY_NCOLS)

    def bench_cases(self):
        return [self.case(fmt, *BENCH_SHAPE, 1, "seed:1") for fmt in FORMATS]
