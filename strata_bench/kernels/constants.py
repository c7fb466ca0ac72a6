"""Numbers the kernels and their Python families must agree on, defined once, here.

A family launches a kernel with a grid and block it computes from these numbers (warps per block, rows per
CTA, shared-memory bytes, block sizes of a format); the kernel was compiled with the same numbers. Python
imports them from this module; CUDA includes `kernels_src/generated/strata_constants.cuh`, which this
module writes (macros only, so including it changes no generated code). `is_current()` / `--check` tell
whether the committed header matches, and tests/kernels/test_constants.py fails when it is stale or when a
kernel spells one of these numbers as a literal again.

Macro names: `STRATA_<NAME>` for a scalar `<NAME>` below; per format `STRATA_<FMT>_QK` (values per block),
`STRATA_<FMT>_BYTES` (bytes per block), `STRATA_<FMT>_TABLE_WORDS` (32-bit words of its decode table in
shared memory); `STRATA_PFGEMM_FMT_<FMT>` (the pfgemm kernels' format template argument).

Run `python -m strata_bench.kernels.constants` to rewrite the header, `--check` to verify it (exit 1 if stale).
"""
from __future__ import annotations

import sys
from pathlib import Path

from strata_bench.kernels.generated import GeneratedHeader

HEADER_RELPATH = "generated/strata_constants.cuh"

# Block layouts: format -> (values, bytes) per block. The field offsets inside a block are CUDA-only and
# live in kernels_src/formats/<fmt>.cuh; these two numbers are what Python needs too.
BLOCK_SHAPES: dict[str, tuple[int, int]] = {
    "q8_0": (32, 34), "q2_0": (64, 18), "iq4_nl": (32, 18), "iq4_xs": (256, 136),
    "iq2_xxs": (256, 66), "iq2_xs": (256, 74), "iq2_s": (256, 82),
    "iq3_xxs": (256, 98), "iq3_s": (256, 110), "iq1_s": (256, 50), "iq1_m": (256, 56),
    "q8_1": (32, 36),  # the activation format every integer dot reads
}

# Decode-table words a new mmvq/grouped kernel stages in shared memory per format (SharedTab<F>), the
# size of the generated table it reads (a static_assert in common/iq_decode.cuh ties the two).
TABLE_WORDS: dict[str, int] = {"iq2_xxs": 256, "iq2_xs": 512, "iq2_s": 1024, "iq3_xxs": 256, "iq3_s": 512,
                               "iq1_s": 2048, "iq1_m": 2048, "iq4_nl": 4, "iq4_xs": 4, "q8_0": 0, "q2_0": 0}

DEQUANT_THREADS = 256  # dequant_f32: threads per block, one 32-value chunk each
Q8_1_WARPS = 8  # quantize_q8_1: warps per block, one q8_1 block each
MMVQ_OLD_WARPS = 4  # mmvq_old: warps (rows) per block
MMVQ_NEW_WARPS = 8  # mmvq_new: warps per block
MMVQ_NEW_MIN_BLOCKS_ONE = 3  # mmvq_new: default blocks per SM of a 1-column pass (<= 85 registers)
MMVQ_NEW_MIN_BLOCKS_WIDE = 2  # mmvq_new: default blocks per SM of a wider pass (<= 128 registers)
GROUPED_WARPS = 4  # grouped_*_old: warps per block (new's blocks are mmvq_new's)
Q2WARP_OLD_THREADS = 128  # q2warp_old: threads per row (one block a row)
Q2WARP_NEW_WARPS = 4  # q2warp_new<NC, NWARPS>: the NWARPS instance the family compiles (16 rows per CTA)
Q2WARP_ROWS_PER_WARP = 4  # q2warp_new: rows a warp owns
Q2WARP_SLOT_GRANULES = 20  # q2warp_new: 16-byte weight granules staged per row and group
PFGEMM_THREADS = 256  # both pfgemm kernels
PFGEMM_OLD_ROWS, PFGEMM_OLD_TILE_ROWS = 128, 32  # pfgemm_old: weight rows x token rows per block
PFGEMM_NEW_ROWS, PFGEMM_NEW_TILE_ROWS = 128, 64  # pfgemm_new
SWIGLU_WARPS = 8  # quantize_rows_q8_1 and swiglu_q8_1_fused: warps per CTA
SWIGLU_BLOCKS_PER_WARP = 4  # swiglu_q8_1_fused: q8_1 blocks a warp converts
SWIGLU_H_THREADS = 256  # swiglu_h_f32: threads per block, one element each
FP16DEQ_THREADS = 256  # every fp16deq kernel
MOE_THREADS = 256  # every moe_combine kernel: threads per token row
MOE_RESIDUAL_ROWS = 4  # moe_combine: residual rows updated per token

# Derived: what Python needs in the shape CUDA computes it.
PFGEMM_FORMAT_IDS: dict[str, int] = {"iq2_s": 0, "iq4_nl": 1, "q2_0": 2}  # template argument of both kernels
SWIGLU_GRANULE: dict[str, int] = {fmt: BLOCK_SHAPES[fmt][0] for fmt in ("q2_0", "iq4_nl", "q8_0")}
Q2WARP_STATIC_SHARED_BYTES = Q2WARP_NEW_WARPS * Q2WARP_ROWS_PER_WARP * Q2WARP_SLOT_GRANULES * 16  # wslots

SCALARS = ("DEQUANT_THREADS", "Q8_1_WARPS", "MMVQ_OLD_WARPS", "MMVQ_NEW_WARPS", "MMVQ_NEW_MIN_BLOCKS_ONE",
           "MMVQ_NEW_MIN_BLOCKS_WIDE", "GROUPED_WARPS",
           "Q2WARP_OLD_THREADS", "Q2WARP_NEW_WARPS", "Q2WARP_ROWS_PER_WARP",
           "Q2WARP_SLOT_GRANULES", "PFGEMM_THREADS", "PFGEMM_OLD_ROWS", "PFGEMM_OLD_TILE_ROWS",
           "PFGEMM_NEW_ROWS", "PFGEMM_NEW_TILE_ROWS", "SWIGLU_WARPS", "SWIGLU_BLOCKS_PER_WARP",
           "SWIGLU_H_THREADS", "FP16DEQ_THREADS", "MOE_THREADS", "MOE_RESIDUAL_ROWS")


def macros() -> dict[str, int]:
    """Every macro of the generated header, name -> value, in header order."""
    out: dict[str, int] = {}
    for fmt, (values, nbytes) in BLOCK_SHAPES.items():
        out[f"STRATA_{fmt.upper()}_QK"] = values
        out[f"STRATA_{fmt.upper()}_BYTES"] = nbytes
    out.update({f"STRATA_{fmt.upper()}_TABLE_WORDS": words for fmt, words in TABLE_WORDS.items()})
    out.update({f"STRATA_PFGEMM_FMT_{fmt.upper()}": fid for fmt, fid in PFGEMM_FORMAT_IDS.items()})
    out.update({f"STRATA_{name}": globals()[name] for name in SCALARS})
    return out


def render_header() -> str:
    """The full text of strata_constants.cuh."""
    head = ("// generated by strata_bench/kernels/constants.py; do not edit.\n"
            "// Regenerate with `python -m strata_bench.kernels.constants`; tests/kernels/test_constants.py\n"
            "// fails when stale. Python reads the same numbers from that module. Macros only.\n"
            "#pragma once\n")
    return head + "".join(f"#define {name} {value}\n" for name, value in macros().items())


HEADER = GeneratedHeader(HEADER_RELPATH, render_header, "strata_bench.kernels.constants")


def header_path(root: Path | None = None) -> Path:
    return HEADER.path(root)


def is_current(root: Path | None = None) -> bool:
    """True when the committed header equals what this module generates."""
    return HEADER.is_current(root)


def write_header(root: Path | None = None) -> Path:
    return HEADER.write(root)


def main(argv: list[str] | None = None) -> int:
    return HEADER.main(argv, f"Generate kernels_src/{HEADER_RELPATH}.", "")


if __name__ == "__main__":
    sys.exit(main())
