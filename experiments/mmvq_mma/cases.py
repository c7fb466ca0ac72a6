"""mmvq_mma (tensor-core mma for the chunk integers: kernels_src/mmvq/mmvq_mma.cu, which `new` runs for the
tall 8-column passes of iq4_nl, iq4_xs and q8_0), as a --cases file: a family `mmvq_mma` with the variants
old, new and the mma variants of MMA_PASSES (mma, the register-staged schedule, for every format with a
fragment decoder and at every shape it fits, and mma_s2 with 2 cp.async weight stages per warp), so that
parity checks each bitwise against old and bench times them side by side in one run; nothing built-in
changes.

    strata-bench parity --cases experiments/mmvq_mma/cases.py --family mmvq_mma
    strata-bench bench --cases experiments/mmvq_mma/cases.py --family mmvq_mma

The formats: iq4_nl and q8_0 (8 blocks a group), iq4_xs, iq2_xxs, iq1_s (one 256-value super-block a
group, copied as the 16-byte granules that cover it: group_row_bytes). An mma variant runs mmvq_mma for
the 8-column passes of its formats whose activations and stages fit in shared memory (MmaPass.applies);
every other pass (other formats, the 4-, 2- and 1-column passes of 11 columns, a K too long) runs the
family's new kernel as `new` does, so each variant runs every case. The mma variants compile from this
folder's kernels/mmvq_mma_exp.cu: the built-in kernel with the iq2_xxs and iq1_s fragment decoders and the
cp.async stages, which `new` never runs (README.md). Only the public kit is used.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from strata_bench.kit import Variant, builtin_family, extend_builtin, shared_optin

Mmvq = builtin_family("mmvq")
KERNELS = Path(__file__).resolve().parent / "kernels"
OWN_SOURCE = "mmvq_mma_exp.cu"  # in KERNELS
SUPER_FORMATS = ("iq4_xs", "iq2_xxs", "iq1_s")  # 256-value blocks: a warp's 8-chunk group is one block


class MmaPass(NamedTuple):  # not a dataclass: a --cases file's module is not in sys.modules, which dataclass needs
    """One mma variant: which passes it runs mmvq_mma for, and its launch: `formats` (one scale and one
    chunk per block, with an MmaFrag in mma_frag.cuh), `width` columns (the mma's N), per format the tile
    groups per block TG (`groups`: 4 warps each; 4 x 128 threads leave 128 registers) and the weight
    stages per warp S (`stages`: 1 = the next group in registers, S >= 2 = S shared buffers filled by
    cp.async, S - 1 groups in flight), and MINB. Shared memory bounds TG x S (shared_bytes)."""

    name: str = "mma"
    formats: tuple[str, ...] = ("iq4_nl", "q8_0", *SUPER_FORMATS)
    width: int = 8
    groups: tuple[tuple[str, int], ...] = (("iq4_nl", 4), ("q8_0", 3), ("iq4_xs", 4), ("iq2_xxs", 4), ("iq1_s", 4))
    stages: tuple[tuple[str, int], ...] = (("iq4_nl", 1), ("q8_0", 1), ("iq4_xs", 1), ("iq2_xxs", 1), ("iq1_s", 1))
    min_blocks: int = 1

    def tile_groups(self, fmt: str) -> int:
        return dict(self.groups)[fmt]

    def weight_stages(self, fmt: str) -> int:
        return dict(self.stages)[fmt]

    def config(self, fmt: str):
        """The built-in launch description of this variant's pass for fmt (Mmvq.MmaConfig: kernel name,
        threads, shared memory; Mmvq.launch_mma_pass launches it); min_rows 0: the variant runs every shape
        it fits."""
        return Mmvq.MmaConfig(self.tile_groups(fmt), 0, self.min_blocks, self.weight_stages(fmt))

    def kernel(self, fmt: str) -> str:
        return self.config(fmt).kernel(fmt)

    def threads(self, fmt: str) -> int:
        return self.config(fmt).threads

    def shared_bytes(self, fmt: str, nchunks: int) -> tuple[int, int]:
        """(dynamic, static) shared memory, as MmaConfig.shared_bytes counts it."""
        return self.config(fmt).shared_bytes(fmt, nchunks)

    def applies(self, fmt: str, nc: int, nchunks: int, optin: int) -> bool:
        """Whether mmvq_mma runs this pass on a device whose blocks may opt in to `optin` bytes of shared
        memory (kit.shared_optin())."""
        if fmt not in self.formats or nc != self.width:
            return False
        return sum(self.shared_bytes(fmt, nchunks)) <= optin


def _tg_s(**per_format: tuple[int, int]) -> dict:
    """MmaPass fields from fmt=(TG, S) pairs."""
    return {"formats": tuple(per_format), "groups": tuple((f, tg) for f, (tg, _) in per_format.items()),
            "stages": tuple((f, s) for f, (_, s) in per_format.items())}


# The variants one bench run times side by side (parity checks each). mma: the next group in registers
# (S = 1, the measured winner). mma_s2: the same groups in flight by cp.async, kept as the reference of
# the staged pipes (S = 3, 4 and TG = 2 were slower still on the H200, results/logs/20261201T170200Z). A
# format missing from a variant runs new there, as every pass mma does not apply to.
MMA_PASSES = (
    MmaPass(),                                               # baseline: next group in registers; 16 groups
    MmaPass("mma_s2", **_tg_s(iq4_nl=(4, 2), q8_0=(3, 2))),  # the same groups in flight, by cp.async
)
MMA_PASS = MMA_PASSES[0]


def _mma_kernels(p: MmaPass):
    """The variant's kernels from this folder's source, less those the built-in `new` already compiles from
    mmvq/mmvq_mma.cu (its tall passes' launches): a launch gets those from there, the built-in kernel itself."""
    def kernels(family, source: str) -> list[str]:
        if source != OWN_SOURCE:
            return []
        built_in = {k for src in Mmvq.sources for k in family.variant("new").kernels(family, src)}
        return [k for k in (p.kernel(fmt) for fmt in p.formats) if k not in built_in]
    return kernels


def _launch_mma(p: MmaPass):
    def launch(family, case, kernels, dev, outs, stream=None) -> None:
        """Quantize, then per column pass mmvq_mma where the pass applies, else new's kernel for it."""
        family.quantize_activations(case, kernels, dev, stream)
        col0 = 0
        for nc in Mmvq.column_passes(case.ncols):
            if p.applies(case.fmt, nc, case.cols // 32, shared_optin()):
                family.launch_mma_pass(p.config(case.fmt), case, kernels, dev, outs, col0, stream)
            else:
                family.launch_new_pass(case, kernels, dev, outs, col0, nc, Mmvq.new_config(case.fmt, nc), stream)
            col0 += nc
    return launch


def _describe(p: MmaPass) -> str:
    launches = ", ".join(f"{f} TG={p.tile_groups(f)} S={p.weight_stages(f)}" for f in p.formats)
    return (f"8-column passes ({launches}): 16-row x 8-column tiles, chunk integers from an m16n8k32 s8 mma "
            "(mmvq_mma.cu); other passes as new")


MMA_VARIANTS = tuple(Variant(p.name, _mma_kernels(p), _launch_mma(p), _describe(p)) for p in MMA_PASSES)
MMA_VARIANT = MMA_VARIANTS[0]

PARITY_NCOLS = (8, 11)
BENCH_ALL = ((131072, 8192), (4096, 14336), (32768, 8192))  # one 8-column pass; 8 + 2 + 1 (the mma pass beside new's)


# the built-in sources (new runs mmvq/mmvq_mma.cu on tall shapes), then this folder's, for the mma variants
class MmvqMma(extend_builtin("mmvq", OWN_SOURCE, KERNELS, MMA_VARIANTS)):
    name = "mmvq_mma"
    description = "mmvq with mmvq_mma (tensor-core chunk integers) for 8-column passes (experiments/mmvq_mma)"

    def default_cases(self):
        cases = []
        for fmt in MMA_PASS.formats:
            short = (24, 4352) if fmt in SUPER_FORMATS else (24, 544)  # 17 blocks of 256 / 17 chunks
            # + a part tile, 48 chunks and a short K
            cases += self.grid_cases((fmt,), (*Mmvq.SHAPES, (1000, 1536), short), PARITY_NCOLS)
        return cases

    def bench_cases(self):
        # iq4_nl, q8_0: BENCH_ALL, PEER.md's DRAM shape, its built-in shape, and a quarter of the first
        # (2048 tiles: about 4 per tile group, where mma's tail and prologue start to count against new: the
        # default rule's edge); the super-block formats at the DRAM shape (iq4_xs, nearest its target, also
        # at the quarter)
        shapes = {"iq4_nl": BENCH_ALL, "q8_0": BENCH_ALL, "iq4_xs": ((131072, 8192), (32768, 8192))}
        return [self.case(fmt, r, k, 8, "seed:1") for fmt in MMA_PASS.formats
                for r, k in shapes.get(fmt, ((131072, 8192),))]
