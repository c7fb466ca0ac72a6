"""ggml's multi-token MoE mat-vec, mmvq.cu's `mul_mat_vec_q_moe`, for grouped's cases (variant ggml_moe):
what ggml_cuda_mul_mat_vec_q launches for a MUL_MAT_ID of several tokens (`has_ids && ncols_dst > 1`, at
most MMVQ_MAX_BATCH_SIZE tokens on NVIDIA Volta and Ada Lovelace and newer, get_mmvq_mmid_max_batch).

grouped's E entries (sorted by expert, each with its own activation row) are read as T tokens of S expert
slots, entry e = t S + s, T the largest divisor of E from 2 to the token limit (35 entries: 7 tokens of 5
slots); a case whose entries have none (a prime above the limit) is not this variant's. Then, as ggml derives
them for MUL_MAT_ID: src0 the experts' matrices, src1 [k][S][T] (a row per slot: ne11 = S), ids [S][T] (each
slot's expert), dst [rows][S][T]; ncols_dst = T, nchannels_y = nchannels_dst = S, stride_col_y = S k / 32
(one token's q8_1 rows), stride_channel_y = k / 32, stride_col_dst = S rows, stride_channel_dst = rows,
ids_stride = S. mul_mat_vec_q_moe_launch: rows_per_block rows a CUDA block (2, read), grid
(ceil(rows / rows_per_block), S), block (32, T): a warp a token, no shared memory, the warp's butterfly.
gate/up is one launch with the fusion arguments (gate, SwiGLU), `mul_mat_vec_q_moe<type, 2, true>`; down
`mul_mat_vec_q_moe<type, 2, false>`. The dot per block is mul_mat_vec_q's (get_vec_dot_q_cuda), so
grouped's ggml error model (error.MoeErrorModel) holds: its fp32 allowance counts every chunk of a row in one
thread's sum, which is this kernel's case, plus 8 shared-memory roundings it does not make.
"""
from __future__ import annotations

import re
from typing import Any

from strata_bench.errors import InputError
from strata_bench.ggml.launch import FLOAT_P, FUSION, INT_P, NO_FUSION, U32, UINT3, VOID_P, Argument, Launch
from strata_bench.ggml.tree import GgmlTree, lacking_kernel, squash
from strata_bench.kernels.launch import ceil_div
from strata_bench.toml_abi.args import fastdiv_values as fastdiv
from strata_bench.toml_abi.c_types import CType

SOURCE = "src/ggml-cuda/mmvq.cu"
KERNEL = "mul_mat_vec_q_moe"
PARAMS = ("const void * vx_ptr, const void * vy_ptr, const int32_t * ids_ptr, const "
          "ggml_cuda_mm_fusion_args_device fusion, float * dst_ptr, const uint32_t ncols_x, const uint3 nchannels_y, "
          "const uint32_t nrows_x, const uint32_t stride_row_x, const uint32_t stride_col_y, const uint32_t "
          "stride_col_dst, const uint32_t stride_channel_x, const uint32_t stride_channel_y, const uint32_t "
          "stride_channel_dst, const uint32_t ncols_dst, const uint32_t ids_stride")
SIGNATURE: tuple[tuple[str, CType], ...] = (
    ("vx", VOID_P), ("vy", VOID_P), ("ids", INT_P), ("fusion", FUSION), ("dst", FLOAT_P), ("ncols_x", U32),
    ("nchannels_y", UINT3), ("nrows_x", U32), ("stride_row_x", U32), ("stride_col_y", U32), ("stride_col_dst", U32),
    ("stride_channel_x", U32), ("stride_channel_y", U32), ("stride_channel_dst", U32), ("ncols_dst", U32),
    ("ids_stride", U32))
WARP = 32
# What the plan reads from the tree: mul_mat_vec_q_moe_launch's rows a block, the token limit, and the
# dispatch that sends a MUL_MAT_ID of more than one token to the kernel.
ROWS_RE = r"staticvoidmul_mat_vec_q_moe_launch\(.*?constexprintrows_per_block=(\d+);"
LIMIT = ("src/ggml-cuda/mmvq.cuh", r"#defineMMVQ_MAX_BATCH_SIZE(\d+)")
DISPATCH = "if (has_ids && ncols_dst > 1) {"


def numbers(tree: GgmlTree) -> tuple[int, int] | None:
    """(rows a CUDA block, most tokens) as the tree sets them; None where either is not found."""
    text = squash(tree.path(SOURCE).read_text(errors="replace"))
    rows = re.search(ROWS_RE, text)
    header = tree.path(LIMIT[0])
    limit = re.search(LIMIT[1], squash(header.read_text(errors="replace"))) if header.is_file() else None
    if rows is None or limit is None or not (1 <= int(rows.group(1)) <= 32 and 2 <= int(limit.group(1)) <= 32):
        return None
    return int(rows.group(1)), int(limit.group(1))


def lacking(tree: GgmlTree) -> str | None:
    """None where the tree has the kernel with the parameters the plan passes, its launch numbers and the
    multi-token dispatch; else why not, naming the file and what it lacks."""
    why = lacking_kernel(tree.root, SOURCE, KERNEL, PARAMS)
    if why is not None:
        return why
    if squash(DISPATCH) not in squash(tree.path(SOURCE).read_text(errors="replace")):
        return f"{SOURCE} has no `{DISPATCH}`: the multi-token MUL_MAT_ID path (an unsupported ggml version?)"
    if numbers(tree) is None:
        return (f"{SOURCE}: mul_mat_vec_q_moe_launch's rows_per_block or {LIMIT[0]}'s MMVQ_MAX_BATCH_SIZE "
                "was not found (an unsupported ggml version?)")
    return None


def check_device(major: int, minor: int) -> None:
    """InputError where ggml's token limit is another table's (get_mmvq_mmid_max_batch: 8 tokens on NVIDIA
    Volta and Ada Lovelace and newer only)."""
    if not ((major, minor) == (7, 0) or (major, minor) >= (8, 9)):
        raise InputError(f"--ggml: ggml's MUL_MAT_ID token limit on compute capability {major}.{minor} is a "
                         "per-format table; the adapter writes only that of 7.0 and 8.9 and newer")


def tokens(entries: int, limit: int) -> tuple[int, int] | None:
    """(T tokens, S slots) for `entries` = T S: the largest T from 2 to `limit` that divides it; None where
    none does."""
    return next(((t, entries // t) for t in range(min(limit, entries), 1, -1) if entries % t == 0), None)


def kernel_name(tree: GgmlTree, fmt: str, fused: bool) -> str:
    rows, _ = numbers(tree) or (2, 0)
    return f"{KERNEL}<(ggml_type){tree.type_ids[fmt]}, {rows}, {'true' if fused else 'false'}>"


def instances(tree: GgmlTree, gate_formats: tuple[str, ...], down_formats: tuple[str, ...]) -> list[str]:
    """Every instance a case may launch: fused for the gate/up formats, plain for the down formats."""
    return list(dict.fromkeys([kernel_name(tree, f, True) for f in gate_formats]
                              + [kernel_name(tree, f, False) for f in down_formats]))


def readable_rows(tree: GgmlTree, rows: int, experts: int) -> int:
    """Rows of the stacked expert matrices the kernel reads: each CUDA block reads all of its rows (only the
    writes are guarded), so the last expert's last block reads up to a whole block."""
    rpb, _ = numbers(tree) or (2, 0)
    return (experts - 1) * rows + ceil_div(rows, rpb) * rpb


def plan(tree: GgmlTree, fmt: str, shape: dict[str, int], w: Any, xq: Any, ids: Any, dst: Any,
         gate: Any = None) -> Launch:
    """One matrix of a case (`shape`: rows, k, experts, entries, block_values) as T tokens of S slots;
    `gate` the gate matrices of the fused gate/up launch (None: no fusion)."""
    from strata_bench.ggml.moe import swiglu_op

    rows, k = shape["rows"], shape["k"]
    rpb, limit = numbers(tree) or (2, 0)
    t, s = tokens(shape["entries"], limit) or (0, 0)
    per_row, per_slot = k // shape["block_values"], k // 32
    fusion = NO_FUSION if gate is None else {"gate": gate, "glu_op": swiglu_op(tree)}
    values = (w, xq, ids, fusion, dst, k, fastdiv(s), rows, per_row, s * per_slot, s * rows, rows * per_row,
              per_slot, rows, t, s)
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(SIGNATURE, values))
    return Launch(kernel_name(tree, fmt, gate is not None), (ceil_div(rows, rpb), s, 1), (WARP, t, 1), params)
