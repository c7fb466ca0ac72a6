"""ggml's MoE mat-vec (mmvq.cu's `mul_mat_vec_q` with expert ids) for grouped's two matrices, launched as
ggml_cuda_mul_mat_vec_q launches a MUL_MAT_ID of one token whose expert slots are grouped's entries:

- src0 the experts' matrices [experts][rows][k], src1 one activation row per slot (ne11 = entries), ids
  the expert of each slot (ne0 = entries, one token), dst [entries][rows]; so ncols_dst = 1 (one token),
  nchannels_y = nchannels_dst = entries, and the kernel reads its expert as `ids[channel_dst]`;
- gate/up: one launch with the fusion arguments: vx the up matrix, `fusion.gate` the gate matrix,
  `fusion.glu_op` GGML_GLU_OP_SWIGLU (its value read from the tree's ggml.h), the rest null, so the kernel
  is `mul_mat_vec_q<type, 1, true, small_k, false>` and writes H = up(x) * silu(gate(x));
  down: `mul_mat_vec_q<type, 1, false, small_k, false>` over H's q8_1 blocks;
- the GENERIC table (mmvq.py): 4 warps, small_k as should_use_small_k takes it (ids do not change it), rows
  per CUDA block 1 (4 with small_k), grid (ceil(rows / rows per block), entries, 1), block (32, 4, 1);
- strides as ggml derives them for MUL_MAT_ID: row stride in blocks, channel strides (expert matrix, one
  slot's q8_1 row, one slot's output row), stride_col_y = entries x k / 32 and stride_col_dst =
  entries x rows (the token's; the kernel's write guard reads it as the row count), sample strides of the
  one sample, ids_stride = entries, nchannels_y as fastdiv(entries), channel_ratio (0, 0, 0).
The activations are the family's q8_1 rows, unpadded (ggml pads each to 512 values and passes the stride:
the kernel reads a slot's own k / 32 blocks either way).
"""
from __future__ import annotations

import re
from typing import Any

from strata_bench.ggml import mmvq
from strata_bench.ggml.launch import NO_FUSION, Argument, Launch
from strata_bench.ggml.tree import GgmlTree, squash
from strata_bench.kernels.launch import ceil_div
from strata_bench.toml_abi.args import fastdiv_values as fastdiv

FUSION_STRUCT = "ggml_cuda_mm_fusion_args_device"
# The struct's fields as common.cuh declares them (launch.FUSION's layout); another list is another ABI.
FUSION_FIELDS = ("const void * x_bias = nullptr; const void * gate = nullptr; const void * gate_bias = nullptr; "
                 "const void * x_scale = nullptr; const void * gate_scale = nullptr; ggml_glu_op glu_op; "
                 "float glu_limit = 0.0f;")
SWIGLU = "GGML_GLU_OP_SWIGLU"
# The SwiGLU the error model's silu bound is derived for (unary.cuh); under -use_fast_math expf is __expf.
SILU = ("ggml_cuda_op_silu_single", "return x / (1.0f + expf(-x));")


def swiglu_op(tree: GgmlTree) -> int | None:
    """GGML_GLU_OP_SWIGLU's value in the tree's `enum ggml_glu_op` (include/ggml.h); None where it has none."""
    text = tree.path("include/ggml.h").read_text(errors="replace")
    body = re.search(r"enum\s+ggml_glu_op\s*\{([^}]*)\}", re.sub(r"//[^\n]*", "", text))
    value = -1
    for entry in (e.strip() for e in (body.group(1) if body else "").split(",")):
        name, _, given = entry.partition("=")
        value = int(given, 0) if given.strip() else value + 1
        if name.strip() == SWIGLU:
            return value
    return None


def lacking(tree: GgmlTree) -> str | None:
    """None where the tree has what the launches and the error model rest on; else why not, naming it."""
    common = tree.path("src/ggml-cuda/common.cuh").read_text(errors="replace")
    struct = re.search(rf"struct\s+{FUSION_STRUCT}\s*\{{([^}}]*)\}}", common)
    if struct is None or squash(struct.group(1)) != squash(FUSION_FIELDS):
        return f"src/ggml-cuda/common.cuh: {FUSION_STRUCT} is not the struct mul_mat_vec_q's fused launch passes"
    if swiglu_op(tree) is None:
        return f"include/ggml.h: enum ggml_glu_op has no {SWIGLU}, the GLU the fused gate/up launch asks for"
    return silu_lacking(tree, "grouped")


def silu_lacking(tree: GgmlTree, family: str) -> str | None:
    """None where unary.cuh's SiLU is SILU, the one `family`'s error model bounds; else why not."""
    unary = tree.path("src/ggml-cuda/unary.cuh")
    body = re.search(rf"{SILU[0]}\(float x\)\s*\{{([^}}]*)\}}", unary.read_text(errors="replace")) \
        if unary.is_file() else None
    if body is None or squash(body.group(1)) != squash(SILU[1]):
        return f"src/ggml-cuda/unary.cuh: {SILU[0]} is not `{SILU[1]}`, which {family}'s error model bounds"
    return None


def instances(tree: GgmlTree, gate_formats: tuple[str, ...], down_formats: tuple[str, ...]) -> list[str]:
    """Every instance a case may launch: fused at one column for the gate/up formats, plain for the down
    formats, each with small_k where it can be taken."""
    names = []
    for formats, fused in ((gate_formats, True), (down_formats, False)):
        for fmt in formats:
            flags = (False, True) if fmt not in mmvq.NO_SMALL_K else (False,)
            names += [mmvq.kernel_name(tree, fmt, 1, flag, fused) for flag in flags]
    return list(dict.fromkeys(names))


def rows_per_block(tree: GgmlTree, fmt: str, k: int, block_values: int) -> int:
    return mmvq.rows_per_block(1, mmvq.small_k(tree, fmt, k, block_values, 1))


def readable_rows(tree: GgmlTree, fmt: str, rows: int, k: int, block_values: int, experts: int) -> int:
    """Rows of the stacked expert matrices the kernel reads: the last expert's last CUDA block reads all of
    its rows (only writes are guarded)."""
    rpb = rows_per_block(tree, fmt, k, block_values)
    return (experts - 1) * rows + ceil_div(rows, rpb) * rpb


def plan(tree: GgmlTree, fmt: str, shape: dict[str, int], w: Any, xq: Any, ids: Any, dst: Any,
         gate: Any = None) -> Launch:
    """One matrix of a case: `shape` has rows, k, experts, entries and the format's block_values and
    block_bytes; `w` the packed expert matrices (row stride k / block_values blocks); `gate` the gate
    matrices of a fused gate/up launch (None: no fusion)."""
    rows, k, experts, entries = shape["rows"], shape["k"], shape["experts"], shape["entries"]
    use = mmvq.small_k(tree, fmt, k, shape["block_values"], 1)
    rpb = mmvq.rows_per_block(1, use)
    per_row, per_slot = k // shape["block_values"], k // 32
    fusion = NO_FUSION if gate is None else {"gate": gate, "glu_op": swiglu_op(tree)}
    values = (w, xq, ids, fusion, dst, k, fastdiv(entries), per_row, entries * per_slot, entries * rows,
              (0, 0, 0), rows * per_row, per_slot, rows, fastdiv(1), experts * rows * per_row,
              entries * per_slot, entries * rows, entries)
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(mmvq.SIGNATURE, values))
    return Launch(mmvq.kernel_name(tree, fmt, 1, use, gate is not None), (ceil_div(rows, rpb), entries, 1),
                  (mmvq.WARP, mmvq.nwarps(1), 1), params)
