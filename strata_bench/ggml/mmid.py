"""ggml's MUL_MAT_ID on mul_mat_q (ggml_cuda_mul_mat_q with ids) for pfgemm's cases: token rows sorted by
expert, each token row with one expert.

ggml sees such a case as src0 [K][N][E] (the experts' matrices, stacked), src1 [K][1][T] (ne11 = 1: one
activation row a token, as for gate/up), ids [1][T] (n_expert_used 1: each token's expert) and dst [N][1][T],
and launches on one stream:
1. mmid.cu's `mm_ids_helper<0>` (n_expert_used 1 is its switch's generic case): grid (E, 1, 1), block
   (32, 1, 1), T ints of dynamic shared memory. Per expert, in token order, the tokens that use it:
   ids_src1 (each compact column's src1 row, it * sis1 + iex % ne11: the token), ids_dst (its dst column,
   it * n_expert_used + iex: the token again) and expert_bounds (expert e's compact columns are
   [bounds[e], bounds[e+1])). write_inverse is false: ggml's one-row-per-token dedup needs n_expert_used > 1.
2. quantize.cu's quantize_mmq_q8_1 over the T compact columns, column i from src1 row ids_src1[i]
   (s11 = s12 = K floats, s13 = T K);
3. mul_mat_q with ids_dst and expert_bounds, each expert a channel of the grid (mmq.expert_args: ncols_max
   and ncols_opt T, so J is chosen for T tokens and most tiles of an expert are empty), and its fixup.
pfgemm's tokens are sorted by expert, so both maps come out the identity; ggml builds them all the same.

mul_mat_q reads its weights a K tile (MMQ_ITER_K values) at a time, past the end of a row whose K is not a
multiple of it (iq4_nl at K 640): the next row's blocks there, and after the last row ggml's allocator's
padding, all multiplied by the zero codes of the q8_1 padding. `readable_rows` says how many zero rows such a
case needs after the last expert.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import numpy as np

from strata_bench.ggml import mmq
from strata_bench.ggml.launch import I32, Argument, Launch
from strata_bench.ggml.tree import QUANTIZE, GgmlTree, lacking_kernel
from strata_bench.kernels.launch import ceil_div
from strata_bench.toml_abi.c_types import CType, parse_ctype

SOURCE = "src/ggml-cuda/mmid.cu"
KERNEL = "mm_ids_helper"
PARAMS = ("const int32_t * __restrict__ ids, int32_t * __restrict__ ids_src1, int32_t * __restrict__ ids_dst, "
          "int32_t * __restrict__ expert_bounds, const int n_tokens, const int n_expert_used_var, const int "
          "nchannels_y, const int si1, const int sis1, const bool write_inverse")
HELPER = f"{KERNEL}<0>"  # ggml_cuda_launch_mm_ids_helper's default case: n_expert_used 1
OUT_P = parse_ctype("int32_t*")
SIGNATURE: tuple[tuple[str, CType], ...] = (
    ("ids", parse_ctype("const int32_t*")), ("ids_src1", OUT_P), ("ids_dst", OUT_P), ("expert_bounds", OUT_P),
    ("n_tokens", I32), ("n_expert_used_var", I32), ("nchannels_y", I32), ("si1", I32), ("sis1", I32),
    ("write_inverse", parse_ctype("bool")))
WARP = 32
EXPERTS_USED = 1  # each of pfgemm's token rows has one expert


@dataclass(frozen=True)
class Experts:
    """One pfgemm case as ggml's MUL_MAT_ID sees it."""

    rows: int  # N: weight rows per expert
    k: int  # K: values per row
    tokens: int  # T
    experts: int  # E
    block_values: int  # the format's qk

    def args(self) -> mmq.Args:
        return mmq.expert_args(self.rows, self.k, self.tokens, self.experts, self.block_values)


def lacking(tree: GgmlTree) -> str | None:
    """None where the tree has mul_mat_q's kernels (mmq.lacking) and mmid.cu's helper with the parameters the
    plan passes; else why not, naming the file or the kernel."""
    return mmq.lacking(tree) or lacking_kernel(tree.root, SOURCE, KERNEL, PARAMS)


def expert_ids(sizes: np.ndarray) -> np.ndarray:
    """ggml's ids tensor [1][T] for token rows sorted by expert: each token's expert."""
    return np.repeat(np.arange(len(sizes), dtype=np.int32), np.asarray(sizes, dtype=np.int64))


def helper_plan(experts: int, tokens: int, ids: Any, ids_src1: Any, ids_dst: Any, bounds: Any) -> Launch:
    """ggml_cuda_launch_mm_ids_helper for src1 [K][1][T] and ids [1][T]: si1 (ids' token stride) and sis1
    (src1's token stride over its row stride) are 1, nchannels_y is ne11 = 1."""
    values = (ids, ids_src1, ids_dst, bounds, tokens, EXPERTS_USED, 1, 1, 1, False)
    params = tuple(Argument(label, ctype, v) for (label, ctype), v in zip(SIGNATURE, values))
    return Launch(HELPER, (experts, 1, 1), (WARP, 1, 1), params, tokens * 4)


def readable_rows(cfg: mmq.Config, shape: Experts) -> int:
    """The weight rows mul_mat_q may read: every expert's, and zero rows for the K tile that passes the last
    row's end (K not a multiple of the config's K tile)."""
    blocks = shape.k // shape.block_values
    per_tile = cfg.k_vram // shape.block_values
    past = ceil_div(blocks, per_tile) * per_tile - blocks
    return shape.experts * shape.rows + ceil_div(past, blocks)


def ids_dst_ints(tokens: int) -> int:
    """ids_dst as allocated here: mul_mat_q loads a whole tile's J entries from an expert's first column, up
    to J_max past the last token (ggml's pool allocations are larger than asked)."""
    return tokens + mmq.J_MAX


def plan(tree: GgmlTree, cfg: mmq.Config, fmt: str, shape: Experts, nsm: int, w: Any, x: Any,
         bufs: Mapping[str, Any], dst: Any) -> Iterator[tuple[str, Launch]]:
    """(source, launch) of the helper, the gathered quantization and mul_mat_q with ids (and its fixup), in
    ggml's order; x: float32 [T][K]. `bufs`: ids, ids_src1, ids_dst, bounds, xq and tmp, device arrays of the
    sizes ggml allocates (ids_dst: ids_dst_ints)."""
    yield SOURCE, helper_plan(shape.experts, shape.tokens, bufs["ids"], bufs["ids_src1"], bufs["ids_dst"],
                              bufs["bounds"])
    k, t = shape.k, shape.tokens
    yield QUANTIZE, mmq.quantize_plan(fmt, k, t, x, bufs["xq"], bufs["ids_src1"], (k, k, k * t))
    ids = (bufs["ids_dst"], bufs["bounds"])
    for step in mmq.plan(tree, cfg, shape.args(), nsm, w, bufs["xq"], dst, bufs["tmp"], ids):
        yield mmq.instance_source(fmt), step
