"""ggml's float32 dequantization (convert.cu) and q8_1 quantization (quantize.cu), launched as ggml's
host functions launch them over a contiguous tensor of k = rows x cols values:

- dequantize_row_<type>_cuda: one CUDA block per 256-value super-block, `dequantize_block_<type><float>(vx,
  y)`, of 64 threads for q2_K, q3_K, q5_K and q6_K and 32 for the others; q4_0, q4_1 and iq4_nl take the
  count of 32-value blocks too and have a CUDA block per 256 values, rounded up;
- dequantize_block_cont_cuda (q8_0, q5_0, q5_1): the generic `dequantize_block<qk, qr, &dequantize_x,
  float>` over one row of k values, 256 threads of two values each, strides in blocks;
- quantize_row_q8_1_cuda: `quantize_q8_1` with 256 threads per CUDA block, a grid of (ceil(cols / 256),
  rows, 1), the row stride in floats.
The weights are packed rows (the tensor is contiguous in ggml), so a case with padded rows runs on a copy.
"""
from __future__ import annotations

from typing import Any

from strata_bench.toml_abi.c_types import CType
from strata_bench.toml_abi.args import fastdiv_values as fastdiv  # ggml's init_fastdiv_values
from strata_bench.ggml.launch import FLOAT_P, I32, I64, U32, UINT3, VOID_P, Launch, Argument
from strata_bench.ggml.tree import TYPE_NAMES
from strata_bench.kernels.launch import ceil_div

SUPER = 256  # values per CUDA block of the per-block kernels (QK_K)
SIXTY_FOUR = ("q2_k", "q3_k", "q5_k", "q6_k")  # threads per CUDA block 64 (dequantize_row_*_cuda)
WITH_COUNT = ("q4_0", "q4_1", "iq4_nl")  # kernels that take the count of 32-value blocks
GENERIC = {"q8_0": (32, 1), "q5_0": (32, 2), "q5_1": (32, 2)}  # dequantize_block<qk, qr, ...>: (qk, qr)
GENERIC_THREADS = 256  # CUDA_DEQUANTIZE_BLOCK_SIZE, two values a thread
QUANTIZE_THREADS = 256  # CUDA_QUANTIZE_BLOCK_SIZE

DEQUANT_SIGNATURE: tuple[tuple[str, CType], ...] = (("vx", VOID_P), ("y", FLOAT_P))
COUNT_SIGNATURE = (*DEQUANT_SIGNATURE, ("nb32", I32))
GENERIC_SIGNATURE = (*DEQUANT_SIGNATURE, ("ne00", I64), ("ne01", I64), ("ne0203", I64), ("ne02", UINT3),
                     ("s01", I64), ("s02", I64), ("s03", I64))
QUANTIZE_SIGNATURE = (("x", FLOAT_P), ("vy", VOID_P), ("ne00", I64), ("s01", I64), ("s02", I64), ("s03", I64),
                      ("ne0", I64), ("ne1", U32), ("ne2", UINT3))
QUANTIZE_KERNEL = "quantize_q8_1"


def ggml_name(fmt: str) -> str:
    """convert.cu's spelling of a type in a kernel name: q4_K, iq2_xxs, q8_0."""
    return TYPE_NAMES[fmt].lower().replace("_k", "_K")


def dequant_kernel(fmt: str) -> str:
    if fmt in GENERIC:
        qk, qr = GENERIC[fmt]
        # A static function: nvcc names it in a per-build internal namespace, which the lookup drops.
        return f"dequantize_block<{qk}, {qr}, &dequantize_{ggml_name(fmt)}, float>"
    return f"dequantize_block_{ggml_name(fmt)}<float>"


def dequant_signature(fmt: str) -> tuple[tuple[str, CType], ...]:
    if fmt in GENERIC:
        return GENERIC_SIGNATURE
    return COUNT_SIGNATURE if fmt in WITH_COUNT else DEQUANT_SIGNATURE


def dequant_plan(fmt: str, k: int, w: Any, y: Any) -> Launch:
    """The launch dequantizing k contiguous values of `fmt` from `w` into `y`."""
    signature = dequant_signature(fmt)
    if fmt in GENERIC:
        qk = GENERIC[fmt][0]
        values = (w, y, k, 1, 1, fastdiv(1), k // qk, k // qk, k // qk)
        grid, block = ceil_div(k, 2 * GENERIC_THREADS), GENERIC_THREADS
    elif fmt in WITH_COUNT:
        values, grid, block = (w, y, k // 32), ceil_div(k, SUPER), 32
    else:
        values, grid, block = (w, y), k // SUPER, 64 if fmt in SIXTY_FOUR else 32
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(signature, values))
    return Launch(dequant_kernel(fmt), (grid, 1, 1), (block, 1, 1), params)


def quantize_plan(rows: int, cols: int, x: Any, q8: Any) -> Launch:
    """quantize_row_q8_1_cuda over a [rows][cols] float32 matrix into [rows][cols / 32] q8_1 blocks."""
    values = (x, q8, cols, cols, rows * cols, rows * cols, cols, rows, fastdiv(1))
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(QUANTIZE_SIGNATURE, values))
    return Launch(QUANTIZE_KERNEL, (ceil_div(cols, QUANTIZE_THREADS), rows, 1), (QUANTIZE_THREADS, 1, 1), params)
