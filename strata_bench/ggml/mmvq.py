"""ggml's mul_mat_vec_q launched as ggml launches it (mmvq.cu: mul_mat_vec_q_switch_ncols_dst and
calc_launch_params), for one weight matrix, one channel, one sample and no fusion, on a device whose
compute capability takes ggml's GENERIC table (NVIDIA 8.0 and newer but the DGX Spark's 12.1; Turing and
AMD have tables of their own, refused).

Per case (rows, cols, ncols <= 8):
- nwarps: 4 for 1-4 columns, 2 for 5-8 (calc_nwarps, GENERIC);
- small_k, one column only: when a block's warps would not all find a weight block in the first trip of
  the K loop (blocks per row < nwarps * vdr * 32 / qi), except for iq3_xxs and iq3_s, which ggml keeps off
  it on Turing and newer (should_use_small_k); it is a template argument, so it picks the instance;
- rows per CUDA block: nwarps with small_k, else 1 at one column and 2 at 2-8 (calc_rows_per_block);
- grid (ceil(rows / rows per block), 1, 1), block (32, nwarps, 1);
- arguments: strides in blocks (weights) and in q8_1 blocks (activations: the family's [ncols][nchunks]),
  the output column stride in floats (the kernel also uses it as the row count of its write guard), the
  channel and sample ratios as fastdiv(1), nchannels_y as (0, 0, 0) since there are no expert ids.
The activations are the family's q8_1 (its prelude quantizes them, as for every mmvq variant); ggml's own
quantize_q8_1 is checked bitwise against it in the q8_1 family.
"""
from __future__ import annotations

from typing import Any, Sequence

from strata_bench.toml_abi.c_types import CType
from strata_bench.toml_abi.args import fastdiv_values as fastdiv  # ggml's init_fastdiv_values
from strata_bench.errors import InputError
from strata_bench.ggml.launch import FLOAT_P, FUSION, INT_P, NO_FUSION, U32, UINT3, VOID_P, Launch, Argument
from strata_bench.ggml.tree import GgmlTree
from strata_bench.kernels.launch import ceil_div

MAX_COLUMNS = 8  # MMVQ_MAX_BATCH_SIZE: above it ggml takes its MMQ path
WARP = 32
# The formats should_use_small_k keeps at the plain launch at one column on NVIDIA Turing and newer.
NO_SMALL_K = ("iq3_xxs", "iq3_s")
SIGNATURE: tuple[tuple[str, CType], ...] = (
    ("vx", VOID_P), ("vy", VOID_P), ("ids", INT_P), ("fusion", FUSION), ("dst", FLOAT_P), ("ncols_x", U32),
    ("nchannels_y", UINT3), ("stride_row_x", U32), ("stride_col_y", U32), ("stride_col_dst", U32),
    ("channel_ratio", UINT3), ("stride_channel_x", U32), ("stride_channel_y", U32), ("stride_channel_dst", U32),
    ("sample_ratio", UINT3), ("stride_sample_x", U32), ("stride_sample_y", U32), ("stride_sample_dst", U32),
    ("ids_stride", U32))


def check_device(major: int, minor: int) -> None:
    """InputError where ggml's launch on this compute capability is not the GENERIC table's."""
    if major < 8 or (major, minor) == (12, 1):
        raise InputError(f"--ggml: ggml launches mul_mat_vec_q with its own table on compute capability "
                         f"{major}.{minor}; the adapter writes only the GENERIC one (8.0 and newer, not 12.1)")


def nwarps(ncols: int) -> int:
    return 4 if ncols <= 4 else 2


def small_k(tree: GgmlTree, fmt: str, cols: int, block_values: int, ncols: int) -> bool:
    if ncols != 1 or fmt in NO_SMALL_K:
        return False
    qi = block_values // (4 * tree.qr[fmt])
    per_iter_one_warp = tree.vdr[fmt] * WARP // qi
    warps = nwarps(ncols)
    return warps > 1 and cols // block_values < warps * per_iter_one_warp


def rows_per_block(ncols: int, use_small_k: bool) -> int:
    if ncols == 1:
        return nwarps(ncols) if use_small_k else 1
    return 2


def kernel_name(tree: GgmlTree, fmt: str, ncols: int, use_small_k: bool, fusion: bool = False) -> str:
    def flag(on: bool) -> str:
        return "true" if on else "false"
    return f"mul_mat_vec_q<(ggml_type){tree.type_ids[fmt]}, {ncols}, {flag(fusion)}, {flag(use_small_k)}, false>"


def instances(tree: GgmlTree, formats: Sequence[str]) -> list[str]:
    """Every instance a case may launch: each format, 1-8 columns, small_k where it can be taken."""
    names = []
    for fmt in formats:
        for ncols in range(1, MAX_COLUMNS + 1):
            flags = (False, True) if ncols == 1 and fmt not in NO_SMALL_K else (False,)
            names += [kernel_name(tree, fmt, ncols, flag) for flag in flags]
    return names


def readable_rows(tree: GgmlTree, fields: dict[str, int], fmt: str) -> int:
    """Rows the kernel reads: every row of every CUDA block, the last one included."""
    use = small_k(tree, fmt, fields["cols"], fields["block_values"], fields["ncols"])
    rpb = rows_per_block(fields["ncols"], use)
    return ceil_div(fields["rows"], rpb) * rpb


def plan(tree: GgmlTree, fmt: str, fields: dict[str, int], w: Any, row_stride: int, xq: Any, y: Any) -> Launch:
    """The launch of one case: `w` the weights at `row_stride` bytes per row (a whole number of blocks)."""
    rows, ncols, nchunks = fields["rows"], fields["ncols"], fields["nchunks"]
    use = small_k(tree, fmt, fields["cols"], fields["block_values"], ncols)
    rpb = rows_per_block(ncols, use)
    one = fastdiv(1)
    values = (w, xq, 0, NO_FUSION, y, fields["cols"], (0, 0, 0), row_stride // fields["block_bytes"], nchunks,
              rows, one, 0, 0, 0, one, 0, 0, 0, 0)
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(SIGNATURE, values))
    return Launch(kernel_name(tree, fmt, ncols, use), (ceil_div(rows, rpb), 1, 1), (WARP, nwarps(ncols), 1),
                  params)
