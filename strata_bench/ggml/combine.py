"""ggml's kernels for moe_combine's computation, launched as ggml-cuda runs the graph that computes it for T
tokens of hidden size H, top-k K and 4 residual rows (DeepSeek V4's hyper-connections: hc = 4):

1. the fused MoE weighted reduction (ggml_cuda_try_fuse matches MUL + VIEWs + ADDs for 2 <= K <= 15):
   `moe_weighted_reduction_f32(experts = Y, expert_scale = null, weights = w, dst = c0, H, K)`, grid
   (T, ceil(H / threads)), `threads` read from the tree's launch (256). Y must be contiguous [T][K][H]: a
   case with padded rows (ld > H) runs on a packed copy, made once per device copy;
2. the shared expert's add (binbcast.cu, ggml_add): `k_bin_bcast<op_add, float, float, float, float const*>(c0, S,
   c, ..., S)`: ggml_add is bin_bcast_cuda with n_fuse = 1, so its pack holds one pointer, S again (an empty
   pack, which ggml never instantiates, would be a kernel of its own: nvcc's cubin has none),
   launch_bin_bcast_pack's geometry: dims collapsed to one row of T x H where both operands are contiguous
   (ld = H), else (H, T) with S's row stride ld; 128 threads (block_size, read), x = min(ne0 / 2, 128);
3. the residual update (dsv4-hc.cu, GGML_OP_DSV4_HC_POST without comb): `dsv4_hc_post_f32<false>(x = c,
   residual = R_in, post = beta, comb = null, dst = R_out, ...)`: R_out[r] = c beta[r] + R_in[r], strides
   in floats of the family's layouts ([4][T][ld] residual rows, beta [4][T] as post's (hc, token) view;
   ggml's op allocates its dst as a new contiguous tensor, here the family's R_out by its strides), one
   thread an element, ceil(4 T H / block) blocks, block read from ggml_cuda_op_dsv4_hc_post (256);
4. the norm's input (GGML_OP_DSV4_HC_PRE, not gated): `dsv4_hc_pre_f32<false>(x = R_out, weights = alpha,
   dst = x, ..., scale = 1)`: x = sum_r R_out[r] alpha[r], ceil(T H / block) blocks (read, 256);
5. RMS_NORM fused with the following MUL by g (ggml_cuda_op_rms_norm_fused): `rms_norm_f32<block, true,
   false, false>`, a CUDA block a token, block 256 where H < 1024 else 1024 (both and the cut read from
   rms_norm_mul_f32_cuda), 32 floats of dynamic shared memory, g as a [H] mul broadcast over the tokens;
6. its fp32 output cast to fp16 (GGML_OP_CPY, cpy.cu): `cpy_scalar_contiguous<float, half>` where xn16's
   rows are contiguous, else `cpy_scalar<cpy_1_scalar<float, half>>` with xn16's row stride ld;
   ceil(T H / CUDA_CPY_BLOCK_SIZE) blocks (cpy.cuh, read: 64).
The chain never forms the inverse RMS (rs) or an fp16 remainder (xn16_lo): the variant omits them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from strata_bench.errors import InputError
from strata_bench.ggml.launch import FLOAT_P, I32, I64, U32, UINT3, Argument, Launch
from strata_bench.ggml.tree import GgmlTree, first_reason, lacking_kernel, squash
from strata_bench.kernels.launch import ceil_div
from strata_bench.toml_abi.args import fastdiv_values as fastdiv
from strata_bench.toml_abi.c_types import CType, parse_ctype

REDUCTION = "src/ggml-cuda/moe-weighted-reduction.cu"
BINBCAST = "src/ggml-cuda/binbcast.cu"
HC = "src/ggml-cuda/dsv4-hc.cu"
NORM = "src/ggml-cuda/norm.cu"
CPY = "src/ggml-cuda/cpy.cu"
SOURCES = (REDUCTION, BINBCAST, HC, NORM, CPY)
HC_ROWS = 4  # the residual rows moe_combine mixes: hyper-connections' hc
FLOAT = parse_ctype("float")
CF, CC, CH = parse_ctype("const float*"), parse_ctype("const char*"), parse_ctype("char*")

# The kernels the plans launch, with the parameter lists they pass (tree.lacking_kernel checks them).
KERNELS = (
    (REDUCTION, "moe_weighted_reduction_f32", "const float * __restrict__ experts, const float * __restrict__ "
     "expert_scale, const float * __restrict__ weights, float * __restrict__ dst, const int64_t n_embd, "
     "const int n_expert_used"),
    (BINBCAST, "k_bin_bcast", "const src0_t * src0, const src1_t * src1, dst_t * dst, const uint32_t ne0, "
     "const uint32_t ne1, const uint32_t ne2, const uint3 ne3, const uint3 ne10, const uint3 ne11, const uint3 ne12, "
     "const uint3 ne13, /*const uint32_t s0,*/ const uint32_t s1, const uint32_t s2, const uint32_t s3, "
     "const uint32_t s00, const uint32_t s01, const uint32_t s02, const uint32_t s03, const uint32_t s10, "
     "const uint32_t s11, const uint32_t s12, const uint32_t s13, src1_ptrs... src1s"),
    (HC, "dsv4_hc_pre_f32", "const float * x, const float * weights, float * dst, int64_t n_embd, int64_t hc, "
     "int64_t n_tokens, int64_t sx0, int64_t sx1, int64_t sx2, int64_t sw0, int64_t sw1, int64_t sw2, int64_t sd0, "
     "int64_t sd1, float scale"),
    (HC, "dsv4_hc_post_f32", "const float * x, const float * residual, const float * post, const float * comb, "
     "float * dst, int64_t n_embd, int64_t hc, int64_t n_tokens, int64_t sx0, int64_t sx1, int64_t sr0, "
     "int64_t sr1, int64_t sr2, int64_t sp0, int64_t sp1, int64_t sc0, int64_t sc1, int64_t sc2, int64_t sd0, "
     "int64_t sd1, int64_t sd2"),
    (NORM, "rms_norm_f32", "const float * x, float * dst, const int ncols, const int64_t stride_row, "
     "const int64_t stride_channel, const int64_t stride_sample, const float eps, const float * mul = nullptr, "
     "const int64_t mul_stride_row = 0, const int64_t mul_stride_channel = 0, const int64_t mul_stride_sample = 0, "
     "const uint3 mul_ncols_packed = make_uint3(0, 0, 0"),  # the regex stops at the first ')'
    (CPY, "cpy_scalar", "const char * cx, char * cdst, const int64_t ne, const int64_t ne00, const int64_t ne01, "
     "const int64_t ne02, const int64_t nb00, const int64_t nb01, const int64_t nb02, const int64_t nb03, "
     "const int64_t ne10, const int64_t ne11, const int64_t ne12, const int64_t nb10, const int64_t nb11, "
     "const int64_t nb12, const int64_t nb13"),
    (CPY, "cpy_scalar_contiguous", "const char * cx, char * cdst, const int64_t ne"),
)
# The arithmetic the error model bounds (fusion_error.py), as the tree writes it (white space aside).
ARITHMETIC = (
    (REDUCTION, "float sum = (experts[first_row * n_embd + col] * first_scale) * weights[first_row];"),
    (REDUCTION, "sum += (experts[row * n_embd + col] * scale) * weights[row];"),
    (BINBCAST, "static __device__ __forceinline__ float op_add(const float a, const float b) { return a + b; }"),
    (HC, "float sum = x[i0*sx0 + it*sx1] * post[idst*sp0 + it*sp1];"),
    (HC, "sum += residual[i0*sr0 + idst*sr1 + it*sr2];"),
    (HC, "sum += xv * wv;"), (HC, "dst[i0*sd0 + it*sd1] = scale * sum;"),
    (NORM, "tmp += xi * xi;"), (NORM, "const float mean = tmp / ncols;"),
    (NORM, "const float scale = rsqrtf(mean + eps);"), (NORM, "dst[col] = scale * x[col] * mul[mul_col];"),
    (CPY, "dst[i] = ggml_cuda_cast<dst_t>(x[i]);"),
)
BLOCK = (32, 1024)  # a CUDA block's threads
# Each launch's numbers: where the tree sets them (a regex over its text without white space) and their range.
NUMBERS = {
    "reduction": (REDUCTION, r"constexprintthreads=(\d{1,5});", BLOCK),
    "bcast": (BINBCAST, r"constintblock_size=(\d{1,5});", BLOCK),
    "hc_post": (HC, r"voidggml_cuda_op_dsv4_hc_post\(.*?constintblock_size=(\d{1,5});", BLOCK),
    "hc_pre": (HC, r"voidggml_cuda_op_dsv4_hc_pre\(.*?constintblock_size=(\d{1,5});", BLOCK),
    "norm_cut": (NORM, r"if\(add==nullptr\)\{.*?if\(ncols<(\d{1,6})\)", (1, 1 << 20)),
    "norm_small": (NORM, r"if\(add==nullptr\)\{.*?if\(ncols<\d+\)\{constdim3block_dims\((\d{1,5}),1,1\);", BLOCK),
    "norm_large": (NORM, r"if\(add==nullptr\)\{.*?\}else\{constdim3block_dims\((\d{1,5}),1,1\);", BLOCK),
    "cpy": ("src/ggml-cuda/cpy.cuh", r"#defineCUDA_CPY_BLOCK_SIZE(\d{1,5})", BLOCK),
    # the fused reduction's top-k (2 ..): above it ggml runs MUL and ADD nodes one by one
    "max_experts": ("src/ggml-cuda/ggml-cuda.cu", r"MOE_WEIGHTED_REDUCTION_MAX_EXPERTS=(\d{1,3});", (2, 999)),
}
NAMES = {REDUCTION: ("moe_weighted_reduction_f32",),
         BINBCAST: ("k_bin_bcast<&op_add, float, float, float, float const*>",),
         HC: ("dsv4_hc_post_f32<false>", "dsv4_hc_pre_f32<false>"),
         CPY: ("cpy_scalar_contiguous<float, __half>", "cpy_scalar<&cpy_1_scalar<float, __half>>")}
GRID_YZ = 65535  # above it binbcast launches another kernel (k_bin_bcast_unravel), not planned here


@dataclass(frozen=True)
class Numbers:
    """The launches' numbers as the tree sets them (NUMBERS)."""

    reduction: int
    bcast: int
    hc_post: int
    hc_pre: int
    norm_cut: int
    norm_small: int
    norm_large: int
    cpy: int
    max_experts: int

    def norm_block(self, hidden: int) -> int:
        return self.norm_small if hidden < self.norm_cut else self.norm_large

    def fuses(self, topk: int) -> bool:
        """Whether ggml runs the fused weighted reduction for `topk` experts (ggml_cuda_match_...: 2 .. max)."""
        return 2 <= topk <= self.max_experts


def numbers(tree: GgmlTree) -> Numbers | None:
    """Numbers of the tree; None where one is not found or is outside its range."""
    found = {}
    for name, (source, pattern, (low, high)) in NUMBERS.items():
        path = tree.path(source)
        match = re.search(pattern, squash(path.read_text(errors="replace")), re.S) if path.is_file() else None
        value = int(match.group(1)) if match else None
        if value is None or not low <= value <= high:
            return None
        found[name] = value
    return Numbers(**found)


def lacking(tree: GgmlTree, bounded: bool = True) -> str | None:
    """None where the tree has every kernel the chain launches, the numbers its launches read and (where
    `bounded`: the tree an error model judges) the arithmetic the model bounds; else why not, naming what."""
    missing = next((s for s in SOURCES if not tree.path(s).is_file()), None)
    if missing is not None:
        return f"{missing} is missing: moe_combine's chain launches its kernels (an older ggml?)"
    kernels = [lambda s=s, k=k, p=p: lacking_kernel(tree.root, s, k, p) for s, k, p in KERNELS]
    arithmetic = (lambda: _arithmetic_lacking(tree),) if bounded else ()
    return first_reason(*kernels, lambda: _numbers_lacking(tree), *arithmetic)


def _arithmetic_lacking(tree: GgmlTree) -> str | None:
    texts = {s: squash(tree.path(s).read_text(errors="replace")) for s in SOURCES}
    line = next((line for source, line in ARITHMETIC if squash(line) not in texts[source]), None)
    if line is None:
        return None
    source = next(s for s, text in ARITHMETIC if text == line)
    return f"{source} has no `{line}`, which moe_combine's error model bounds (an unsupported ggml version?)"


def _numbers_lacking(tree: GgmlTree) -> str | None:
    if numbers(tree) is not None:
        return None
    return (f"the block sizes of moe_combine's launches were not all found ({', '.join(NUMBERS)}: "
            f"{', '.join(sorted({s for s, _, _ in NUMBERS.values()}))}; an unsupported ggml version?)")


def instances(n: Numbers) -> dict[str, tuple[str, ...]]:
    """source -> the kernels a case may launch from it (rms_norm: both of its block sizes)."""
    norm = tuple(dict.fromkeys(f"rms_norm_f32<{b}, true, false, false>" for b in (n.norm_small, n.norm_large)))
    return {**NAMES, NORM: norm}


def signature(expr: str) -> tuple[tuple[str, CType], ...]:
    """Label and C type of each argument a launch of `expr` passes."""
    return SIGNATURES[expr.split("<", 1)[0]]


def _sig(text: str) -> tuple[tuple[str, CType], ...]:
    """'label:type ...' (types: cf const float*, f float*, cc const char*, c char*, l int64_t, i int,
    u uint32_t, 3 uint3, s float) as a signature."""
    types = {"cf": CF, "f": FLOAT_P, "cc": CC, "c": CH, "l": I64, "i": I32, "u": U32, "3": UINT3, "s": FLOAT}
    return tuple((label, types[kind]) for label, kind in (item.split(":") for item in text.split()))


_LONGS = "n_embd:l hc:l n_tokens:l"
SIGNATURES = {
    "moe_weighted_reduction_f32": _sig("experts:cf expert_scale:cf weights:cf dst:f n_embd:l n_expert_used:i"),
    "k_bin_bcast": _sig("src0:cf src1:cf dst:f ne0:u ne1:u ne2:u ne3:3 ne10:3 ne11:3 ne12:3 ne13:3 s1:u s2:u s3:u "
                        "s00:u s01:u s02:u s03:u s10:u s11:u s12:u s13:u src1s:cf"),
    "dsv4_hc_post_f32": _sig(f"x:cf residual:cf post:cf comb:cf dst:f {_LONGS} sx0:l sx1:l sr0:l sr1:l sr2:l sp0:l "
                             "sp1:l sc0:l sc1:l sc2:l sd0:l sd1:l sd2:l"),
    "dsv4_hc_pre_f32": _sig(f"x:cf weights:cf dst:f {_LONGS} sx0:l sx1:l sx2:l sw0:l sw1:l sw2:l sd0:l sd1:l "
                            "scale:s"),
    "rms_norm_f32": _sig("x:cf dst:f ncols:i stride_row:l stride_channel:l stride_sample:l eps:s mul:cf "
                         "mul_stride_row:l mul_stride_channel:l mul_stride_sample:l mul_ncols:3 mul_nrows:3 "
                         "mul_nchannels:3 mul_nsamples:3 add:cf add_stride_row:l add_stride_channel:l "
                         "add_stride_sample:l add_ncols:3 add_nrows:3 add_nchannels:3 add_nsamples:3 scale_out:s"),
    "cpy_scalar_contiguous": _sig("cx:cc cdst:c ne:l"),
    "cpy_scalar": _sig("cx:cc cdst:c ne:l ne00:l ne01:l ne02:l nb00:l nb01:l nb02:l nb03:l ne10:l ne11:l ne12:l "
                       "nb10:l nb11:l nb12:l nb13:l"),
}


def _launch(kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int], values: tuple[Any, ...],
            shared: int = 0) -> Launch:
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(signature(kernel), values))
    return Launch(kernel, grid, block, params, shared)


def reduction_plan(n: Numbers, shape: dict[str, int], y: Any, w: Any, dst: Any) -> Launch:
    """c0 = sum_k w[t, k] Y[t, k] over contiguous [T][K][H] expert rows."""
    t, h, k = shape["T"], shape["H"], shape["K"]
    return _launch(NAMES[REDUCTION][0], (t, ceil_div(h, n.reduction), 1), (n.reduction, 1, 1),
                   (y, 0, w, dst, h, k))


def add_plan(n: Numbers, shape: dict[str, int], c0: Any, s: Any, dst: Any) -> Launch:
    """c = c0 + S as ggml_add launches it, S's rows ld apart (collapsed to one row where ld = H)."""
    t, h, ld = shape["T"], shape["H"], shape["ld"]
    ne0, ne1 = (t * h, 1) if ld == h else (h, t)
    whole = t * h  # the one-sample tensor's stride over its unused dims 2 and 3 (ggml's nb2 = nb3 = nb1 ne1)
    s11, s12 = (whole, whole) if ld == h else (ld, ld * t)
    bx = min(max(ne0 // 2, 1), n.bcast)
    by = min(ne1, n.bcast // bx)
    grid = (ceil_div(max(ne0 // 2, 1), bx), ceil_div(ne1, by), 1)
    if grid[1] > GRID_YZ:
        raise InputError(f"moe_combine: {t} tokens of {h} launch binbcast's other kernel (k_bin_bcast_unravel), "
                         "which the ggml variant does not plan")
    dst_s1 = whole if ld == h else h
    values = (c0, s, dst, ne0, ne1, 1, fastdiv(1), fastdiv(ne0), fastdiv(ne1), fastdiv(1), fastdiv(1),
              dst_s1, whole, whole, 1, dst_s1, whole, whole, 1, s11, s12, s12, s)  # the pack: S again
    return _launch(NAMES[BINBCAST][0], grid, (bx, by, 1), values)


def post_plan(n: Numbers, shape: dict[str, int], c: Any, r_in: Any, beta: Any, r_out: Any) -> Launch:
    """R_out[r] = c beta[r] + R_in[r]: c [T][H], the residual rows [4][T][ld], beta [4][T]."""
    t, h, ld = shape["T"], shape["H"], shape["ld"]
    rows = (1, t * ld, ld)  # element, residual row (hc), token
    values = (c, r_in, beta, 0, r_out, h, HC_ROWS, t, 1, h, *rows, t, 1, 0, 0, 0, *rows)
    return _launch(NAMES[HC][0], (ceil_div(HC_ROWS * t * h, n.hc_post), 1, 1), (n.hc_post, 1, 1), values)


def pre_plan(n: Numbers, shape: dict[str, int], r_out: Any, alpha: Any, x: Any) -> Launch:
    """x = sum_r R_out[r] alpha[r] into [T][H]; alpha [4][T] (sw2 as ggml's transposed view keeps it: 4 T)."""
    t, h, ld = shape["T"], shape["H"], shape["ld"]
    values = (r_out, alpha, x, h, HC_ROWS, t, 1, t * ld, ld, t, 1, HC_ROWS * t, 1, h, 1.0)
    return _launch(NAMES[HC][1], (ceil_div(t * h, n.hc_pre), 1, 1), (n.hc_pre, 1, 1), values)


def norm_plan(n: Numbers, shape: dict[str, int], x: Any, g: Any, y: Any, eps: float) -> Launch:
    """y = rms_norm(x) * g, a CUDA block a token, g [H] broadcast (mul's ne = (H, 1, 1, 1))."""
    t, h = shape["T"], shape["H"]
    block = n.norm_block(h)
    zero = (0, 0, 0)
    values = (x, y, h, h, t * h, t * h, eps, g, h, h, h, fastdiv(h), fastdiv(1), fastdiv(1), fastdiv(1),
              0, 0, 0, 0, zero, zero, zero, zero, 1.0)
    # ggml's dynamic shared memory: one float a warp (32 of them) where the block has more than one warp
    return _launch(f"rms_norm_f32<{block}, true, false, false>", (t, 1, 1), (block, 1, 1), values,
                   shared=32 * 4 if block > 32 else 0)


def cast_plan(n: Numbers, shape: dict[str, int], y: Any, xn16: Any) -> Launch:
    """xn16 = fp16(y): y [T][H] fp32, xn16's rows ld halves apart (contiguous where ld = H)."""
    t, h, ld = shape["T"], shape["H"], shape["ld"]
    grid, block = (ceil_div(t * h, n.cpy), 1, 1), (n.cpy, 1, 1)
    if ld == h:
        return _launch(NAMES[CPY][0], grid, block, (y, xn16, t * h))
    src = (h, t, 1, 4, 4 * h, 4 * h * t, 4 * h * t)  # ne00..02, nb00..03 in bytes
    dst = (h, t, 1, 2, 2 * ld, 2 * ld * t, 2 * ld * t)
    return _launch(NAMES[CPY][1], grid, block, (y, xn16, t * h, *src, *dst))


def chain(n: Numbers, shape: dict[str, int], dev: dict[str, Any], work: dict[str, Any],
          outs: dict[str, Any], eps: float) -> list[tuple[str, Launch]]:
    """(source, launch) of each of the six launches, in ggml's order; `work` holds the fp32 intermediates
    c0, c, x, y ([T][H] each) and Y, the contiguous expert rows."""
    return [(REDUCTION, reduction_plan(n, shape, work["Y"], dev["w"], work["c0"])),
            (BINBCAST, add_plan(n, shape, work["c0"], dev["S"], work["c"])),
            (HC, post_plan(n, shape, work["c"], dev["R_in"], dev["beta"], outs["R_out"])),
            (HC, pre_plan(n, shape, outs["R_out"], dev["alpha"], work["x"])),
            (NORM, norm_plan(n, shape, work["x"], dev["g"], work["y"], eps)),
            (CPY, cast_plan(n, shape, work["y"], outs["xn16"]))]
