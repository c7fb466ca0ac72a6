"""mmvq's cases and references for formats only a foreign variant runs (q4_0 .. q5_1, K-quants: an engine's
kernels declare them with Variant.formats; no built-in kernel has them, docs/ARITHMETIC.md, section 5)."""
from __future__ import annotations

from strata_bench.kit import Expected, MatvecRef

# An engine's mat-vec kernels take 1 to 8 columns. Every column count on a shape of several blocks per row
# and 67 rows (odd); one block per row (its width is the format's block, 32 or 256: the 0 below) on 9 rows;
# 38 rows (even, not a multiple of 4) and a taller, wider shape. Seeded blocks only: edge blocks' 65504
# scales overflow an engine's fp16 scale products (q4_1's __hmul2), outside the bound's model.
FOREIGN_NCOLS = tuple(range(1, 9))
FOREIGN_SHAPES = (((67, 2048), FOREIGN_NCOLS), ((9, 0), (1, 2, 8)), ((38, 1280), (1, 4, 8)), ((128, 4096), (1, 8)))
FOREIGN_FIXTURE_NCOLS = (1, 3, 8)  # the shipped real rows (smollm2-ffn_down.<fmt>, where there is one)


def foreign_shapes(fmt: str) -> list[tuple[int, int, int]]:
    """(rows, cols, ncols) of a foreign format's seeded cases, in FOREIGN_SHAPES' order."""
    from strata_bench.formats import get_format

    block = get_format(fmt).block_size
    return [(rows, cols or block, n) for (rows, cols), ncols in FOREIGN_SHAPES for n in ncols]


def foreign_expected(ref: MatvecRef, cols: slice) -> list[Expected]:
    """The two references of mmvq's own formats, over the exact values, with the bound of an engine's
    integer-dot kernel (numerics/foreign_matvec.py), for the case's columns."""
    return [
        Expected("y", ref.y_q[cols], ref.bound_q[cols], label="f64(q8_1 acts)",
                 why="engine model: rho*mag + alpha*cnt (fp16 scale products) + sigma*|s - sum xq| (offsets on "
                     "the raw sum) + gamma_{K+32} + gamma64_K"),
        Expected("y", ref.y_raw[cols], ref.bound_raw[cols], label="f64(raw acts)",
                 why="q8_1 acts bound + sum|w_k| E_k (a-priori q8_1 rounding) + gamma64_K"),
    ]
