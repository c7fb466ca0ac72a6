"""ggml's SwiGLU and q8_1 quantization for swiglu_q8's cases, launched as ggml runs a GGML_OP_GLU (SWIGLU)
node and then quantizes its output for the down mat-vec (ggml does not fuse the two):

- unary.cu's ggml_cuda_op_swiglu -> ggml_cuda_op_unary_gated<op_silu> -> unary_gated_cuda:
  `unary_gated_op_kernel<op_silu, float>(x, g, dst, k, n, o0, o1)`, k = rows x F values, n = F, ceil(k /
  CUDA_GLU_BLOCK_SIZE) CUDA blocks of CUDA_GLU_BLOCK_SIZE threads (the macro read from the tree's unary.cuh).
  Layout split (ggml_swiglu_split: gate and up two tensors): x the gate, g the up, o0 = o1 = their row
  stride F. Layout concat (ggml_swiglu: one [rows][2F] tensor, src1 null, op param swapped = 0): x the
  tensor, g the tensor + F, o0 = o1 = 2F; swapped = 1 (up first) is a layout swiglu_q8 has no case of;
- quantize.cu's quantize_row_q8_1_cuda over the fp32 h (convert.quantize_plan), unpadded: ggml pads each
  row to 512 values for the mat-vec; swiglu_q8's output rows are F / 32 blocks, as the q8_1 variant's.
"""
from __future__ import annotations

import re
from typing import Any

from strata_bench.ggml import moe
from strata_bench.ggml.launch import FLOAT_P, I64, Argument, Launch
from strata_bench.ggml.tree import GgmlTree, first_reason, lacking_kernel, squash
from strata_bench.kernels.launch import ceil_div
from strata_bench.toml_abi.c_types import CType, parse_ctype

UNARY = "src/ggml-cuda/unary.cu"
UNARY_CUH = "src/ggml-cuda/unary.cuh"
KERNEL = "unary_gated_op_kernel"
PARAMS = ("const T * x, const T * g, T * dst, const int64_t k, const int64_t n, const int64_t o0, "
          "const int64_t o1")
NAME = f"{KERNEL}<&op_silu, float>"  # a static function as a template argument (convert.py's generic kernel)
BLOCK_MACRO = "CUDA_GLU_BLOCK_SIZE"
BLOCK_RANGE = (32, 1024)
# What the error model bounds: op_silu is unary.cuh's SiLU (moe.SILU), and the gated kernel's one product.
OP_SILU = ("op_silu", "return ggml_cuda_op_silu_single(x);")
PRODUCT = "dst[i] = ggml_cuda_cast<T>(op(ggml_cuda_cast<float>(x[j0])) * ggml_cuda_cast<float>(g[j1]));"
CONST_FLOAT_P = parse_ctype("const float*")
SIGNATURE: tuple[tuple[str, CType], ...] = (("x", CONST_FLOAT_P), ("g", CONST_FLOAT_P), ("dst", FLOAT_P),
                                            ("k", I64), ("n", I64), ("o0", I64), ("o1", I64))


def block_size(tree: GgmlTree) -> int | None:
    """CUDA_GLU_BLOCK_SIZE of the tree's unary.cuh, where it defines one in BLOCK_RANGE; else None."""
    path = tree.path(UNARY_CUH)
    text = path.read_text(errors="replace") if path.is_file() else ""
    found = re.search(rf"#define\s+{BLOCK_MACRO}\s+(\d{{1,5}})\b", text)
    value = int(found.group(1)) if found else None
    return value if value is not None and BLOCK_RANGE[0] <= value <= BLOCK_RANGE[1] else None


def lacking(tree: GgmlTree, bounded: bool = True) -> str | None:
    """None where the tree has the gated kernel, its launch's block size and (where `bounded`: the tree an
    error model judges) the SiLU and product the model bounds; else why not, in words naming what."""
    arithmetic = (lambda: _product_lacking(tree), lambda: moe.silu_lacking(tree, "swiglu_q8")) if bounded else ()
    return first_reason(lambda: lacking_kernel(tree.root, UNARY, KERNEL, PARAMS), lambda: _block_lacking(tree),
                        *arithmetic)


def _block_lacking(tree: GgmlTree) -> str | None:
    if block_size(tree) is not None:
        return None
    return f"{UNARY_CUH} defines no {BLOCK_MACRO} in {BLOCK_RANGE[0]}..{BLOCK_RANGE[1]}, the block of {KERNEL}'s " \
           "launch (an unsupported ggml version?)"


def _product_lacking(tree: GgmlTree) -> str | None:
    unary = squash(tree.path(UNARY).read_text(errors="replace"))
    if squash(f"{OP_SILU[0]}(float x) {{ {OP_SILU[1]} }}") in unary and squash(PRODUCT) in unary:
        return None
    return f"{UNARY}: {OP_SILU[0]} or {KERNEL}'s product is not the `{OP_SILU[1]}` and `{PRODUCT}` swiglu_q8's " \
           "error model bounds"


def plan(block: int, rows: int, cols: int, gate: Any, up: Any, ld: int, h: Any) -> Launch:
    """The SwiGLU of `rows` rows of `cols` values into the contiguous fp32 `h`: `gate` and `up` the first
    value of each (views of one [rows][2 cols] array in the concat layout), `ld` their row stride in floats;
    `block` the tree's CUDA_GLU_BLOCK_SIZE."""
    k = rows * cols
    values = (gate, up, h, k, cols, ld, ld)
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(SIGNATURE, values))
    return Launch(NAME, (ceil_div(k, block), 1, 1), (block, 1, 1), params)
