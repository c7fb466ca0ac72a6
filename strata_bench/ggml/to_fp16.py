"""ggml's to-FP16 dequantization (convert.cu, `ggml_get_to_fp16_cuda`) for fp16deq's formats, launched as its
host functions launch them over a contiguous tensor of k = rows x cols values:

- q8_0, on a device with fast fp16 (compute capability 6.0 and newer; ggml takes the generic
  `dequantize_block` below it): dequantize_block_q8_0_f16_cuda, `dequantize_block_q8_0_f16<need_check>(vx,
  y, k)` with need_check = k % NE_ALIGN != 0 (CUDA_Q8_0_NE_ALIGN, read from the tree), ceil(k / NE_ALIGN)
  CUDA blocks of 32 threads (WARP_SIZE). Each CUDA block copies its NE_ALIGN / 32 blocks to shared memory
  as `int`s, so the source must be 4-byte aligned and readable up to the next multiple of 4 bytes
  (need_check stops at the first int past the tensor's bytes, not at its last byte);
- iq4_xs: dequantize_row_iq4_xs_cuda, `dequantize_block_iq4_xs<half>(vx, y)`, ceil(k / 256) CUDA blocks of
  32 threads.
Both write y[0 .. k) contiguously, so they run fp16deq's cases whose output rows are contiguous.
"""
from __future__ import annotations

import re
from typing import Any

from strata_bench.errors import InputError
from strata_bench.ggml.launch import I64, VOID_P, Argument, Launch
from strata_bench.ggml.tree import CONVERT, GgmlTree, lacking_kernel
from strata_bench.kernels.launch import ceil_div
from strata_bench.toml_abi.c_types import CType, parse_ctype

HALF_P = parse_ctype("__half*")
WARP = 32
SUPER = 256  # QK_K: values per CUDA block of dequantize_block_iq4_xs
Q8_0_BLOCK = (32, 34)  # values and bytes of a block_q8_0
FORMATS = ("q8_0", "iq4_xs")
NE_ALIGN_MACRO = "CUDA_Q8_0_NE_ALIGN"
MIN_FAST_FP16 = 6  # fp16_available: compute capability 6.0 (Pascal) and newer
Q8_0_KERNEL, IQ4_XS_KERNEL = "dequantize_block_q8_0_f16", "dequantize_block_iq4_xs"
# The kernels the plans launch, with the parameter lists they pass (tree.lacking_kernel checks them).
KERNELS = ((CONVERT, Q8_0_KERNEL, "const void * __restrict__ vx, half * __restrict__ y, const int64_t k"),
           (CONVERT, IQ4_XS_KERNEL, "const void * __restrict__ vx, dst_t * __restrict__ yy"))
Q8_0_SIGNATURE: tuple[tuple[str, CType], ...] = (("vx", VOID_P), ("y", HALF_P), ("k", I64))
IQ4_XS_SIGNATURE: tuple[tuple[str, CType], ...] = (("vx", VOID_P), ("yy", HALF_P))


def ne_align(tree: GgmlTree) -> int | None:
    """CUDA_Q8_0_NE_ALIGN of the tree's convert.cu (the values one CUDA block of the q8_0 kernel converts);
    None where it defines none."""
    text = tree.path(CONVERT).read_text(errors="replace")
    found = re.search(rf"#define\s+{NE_ALIGN_MACRO}\s+(\d+)\b", text)
    return None if found is None else int(found.group(1))


def lacking(tree: GgmlTree) -> str | None:
    """None where the tree has what the plans launch; else why not, naming the kernel or macro."""
    for source, kernel, params in KERNELS:
        why = lacking_kernel(tree.root, source, kernel, params)
        if why is not None:
            return why
    if ne_align(tree) is None:
        return f"{CONVERT} defines no {NE_ALIGN_MACRO}, which the launch of {Q8_0_KERNEL} needs (an unsupported " \
               f"ggml version?)"
    return None


def kernel_name(fmt: str, need_check: bool = False) -> str:
    """The instance ggml's to-FP16 path launches; `half` written as the type it names (nvcc's symbol says
    __half)."""
    if fmt == "q8_0":
        return f"{Q8_0_KERNEL}<{'true' if need_check else 'false'}>"
    return f"{IQ4_XS_KERNEL}<__half>"


def instances(formats: tuple[str, ...]) -> list[str]:
    """Every instance a case of `formats` may launch (q8_0: with and without need_check)."""
    names = [kernel_name("q8_0", flag) for flag in (False, True)] if "q8_0" in formats else []
    return names + ([kernel_name("iq4_xs")] if "iq4_xs" in formats else [])


def signature(expr: str) -> tuple[tuple[str, CType], ...]:
    return Q8_0_SIGNATURE if expr.startswith(Q8_0_KERNEL) else IQ4_XS_SIGNATURE


def plan(fmt: str, k: int, align: int, w: Any, y: Any) -> Launch:
    """The launch converting k contiguous values of `fmt` from `w` into the halves at `y`; `align` is the
    tree's CUDA_Q8_0_NE_ALIGN."""
    if fmt == "q8_0":
        need_check = k % align != 0
        values, grid = (w, y, k), ceil_div(k, align)
        signature_ = Q8_0_SIGNATURE
    else:
        need_check, values, grid, signature_ = False, (w, y), ceil_div(k, SUPER), IQ4_XS_SIGNATURE
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(signature_, values))
    return Launch(kernel_name(fmt, need_check), (grid, 1, 1), (WARP, 1, 1), params)


def readable_bytes(fmt: str, nbytes: int) -> int:
    """Bytes the kernel reads from a source of `nbytes`: q8_0's int copies read up to a multiple of 4."""
    return ceil_div(nbytes, 4) * 4 if fmt == "q8_0" else nbytes


def needs_aligned_copy(fmt: str, start: int, nbytes: int, total: int) -> bool:
    """Whether rows `start` bytes into a buffer of `total` bytes need a copy: q8_0's int loads need a 4-byte
    aligned start and `readable_bytes` inside the buffer (fp16deq's rows may start 2-byte aligned)."""
    if fmt != "q8_0":
        return False
    return start % 4 != 0 or start + readable_bytes(fmt, nbytes) > total


def aligned_copy(w: Any, start: int, nbytes: int, fmt: str) -> Any:
    """A fresh device buffer (allocations are 256-byte aligned) holding `nbytes` of `w` from `start`,
    zero-padded to what the kernel reads."""
    import cupy

    out = cupy.zeros(readable_bytes(fmt, nbytes), dtype=cupy.uint8)
    out[:nbytes] = w.reshape(-1)[start:start + nbytes]
    return out


def check_device(major: int) -> None:
    """InputError where ggml's q8_0 to-FP16 path is not the half2 kernel (no fast fp16 below 6.0)."""
    if major < MIN_FAST_FP16:
        raise InputError(f"--ggml: on compute capability {major}.x ggml converts q8_0 to FP16 with another "
                         f"kernel than {Q8_0_KERNEL} (fp16_available needs 6.0); the adapter launches only that one")
