"""ggml's quantized prompt GEMM, `mul_mat_q` (mmq.cuh), launched as ggml_cuda_mul_mat_q launches it for one
sample, without expert ids (one weight matrix; src1 batches above MMVQ_MAX_BATCH_SIZE) or with them
(MUL_MAT_ID: mmid.py builds the ids and expert bounds, each expert a channel of the grid):

1. quantize.cu's `quantize_mmq_q8_1<ds_layout, false>` turns the float32 activations [ncols][k] into
   block_q8_1_mmq (128 values, 4 scales, 144 bytes) with k padded to MATRIX_ROW_PADDING (512) values:
   grid (ncols, ceil(k_padded / 512), 1), block (128, 1, 1); the layout (D4, DS4, D2S6) is the format's
   (mmq_get_q8_1_ds_layout). With ids, column i is src1's row ids_src1[i] (the tokens gathered by expert).
   The buffer holds J_max more blocks, which the last tile's loads may reach.
2. `mul_mat_q<type, J, fallback>` from the format's own template instance
   (template-instances/mmq-instance-<fmt>.cu, one NVRTC or nvcc program), with the config ggml takes on
   the device: the Ampere table (mmq-config-ampere.cuh) on compute capability 7.0 to 9.x, read from the
   tree's CASE lines. fallback = rows % 128 != 0 (mul_mat_q_case); J is mul_mat_q_switch_J's: from 8 to
   128 in steps of 8, the first J whose config exists and fits the device's shared memory and gives the
   fewest column tiles, stopping at one tile. Dynamic shared memory J*4 + I*sram_stride*4 +
   pad(J*144, nthreads*4) (mmq_get_nbytes_shared, MMA data layout: Turing and newer).
3. stream-k (every Ampere config): ntiles = ceil(rows / I) * ceil(ncols_max / J) * channels; the grid is
   ntiles where the tiles fill at least 90% of ceil(ntiles / nsm) waves of the SMs, else nsm; where ntiles
   is not a multiple of the grid, blocks write partial tiles to a fixup buffer (grid * J * I floats) and
   `mul_mat_q_stream_k_fixup` (grid (blocks, I / 32, 1), block (32, nwarps / 2, 1)) adds them into dst.
The output is dst [ncols][rows] float32 (stride_col_dst = rows); with ids, column ids_dst[i] of it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from strata_bench.errors import InputError
from strata_bench.ggml.launch import FLOAT_P, I32, INT_P, UINT3, VOID_P, Argument, Launch
from strata_bench.ggml.tree import GgmlTree, TYPE_NAMES
from strata_bench.kernels.launch import ceil_div
from strata_bench.toml_abi.args import fastdiv_values as fastdiv
from strata_bench.toml_abi.c_types import CType, parse_ctype

MMQ_CUH = "src/ggml-cuda/mmq.cuh"
CONFIG_AMPERE = "src/ggml-cuda/mmq-config-ampere.cuh"
WARP = 32
J_STEP, J_MAX = 8, 128  # mul_mat_q_switch_J's loop
FALLBACK_ROWS = 128  # mul_mat_q_case: rows % 128 != 0 takes the instances with fallback
ROW_PADDING = 512  # MATRIX_ROW_PADDING (common.cuh): k of the q8_1 activations is padded to it
MMQ_BLOCK_VALUES, MMQ_BLOCK_BYTES = 128, 144  # block_q8_1_mmq: 4 x 32 values, 4 scales
QUANTIZE_THREADS = 128  # CUDA_QUANTIZE_BLOCK_SIZE_MMQ: each thread quantizes 4 values
TILES_EFFICIENCY = 90  # percent: stream-k runs one block per tile at or above it
# Shared-memory row stride of each SRAM layout in ints (ggml_cuda_mmq_get_sram_stride, MMQ_TILE_NE_K = 32,
# QI8_0 = QI8_1 = 8, QI6_K = 32).
SRAM_STRIDE = {"Q8_0": 76, "Q8_1": 76, "Q2_K": 100, "Q3_K": 84, "Q6_K": 76, "FP4": 76, "NVFP4": 84}
# mmq_get_q8_1_ds_layout: the activation layout each format's dot reads.
DS4_FORMATS = ("q4_0", "q4_1", "q5_1", "q4_k", "q5_k", "iq1_s")
D2S6_FORMATS = ("q2_k",)
DS_LAYOUT_IDS = {"D4": 0, "DS4": 1, "D2S6": 2}  # enum mmq_q8_1_ds_layout

MAIN_SIGNATURE: tuple[tuple[str, CType], ...] = (
    ("x", parse_ctype("const char*")), ("y", INT_P), ("ids_dst", INT_P), ("expert_bounds", INT_P),
    ("dst", FLOAT_P), ("tmp_fixup", FLOAT_P), ("y_scale", parse_ctype("const float*")),
    ("blocks_per_ne00", UINT3), ("nrows_x", I32), ("ncols_dst", I32), ("stride_row_x", I32), ("ncols_y", I32),
    ("stride_col_dst", I32), ("channel_ratio", UINT3), ("nchannels_y", UINT3), ("stride_channel_x", I32),
    ("stride_channel_y", I32), ("stride_channel_dst", I32), ("sample_ratio", UINT3), ("nsamples_y", UINT3),
    ("stride_sample_x", I32), ("stride_sample_y", I32), ("stride_sample_dst", I32), ("ntx", UINT3))
FIXUP_SIGNATURE: tuple[tuple[str, CType], ...] = (
    ("ids_dst", INT_P), ("expert_bounds", INT_P), ("dst", FLOAT_P), ("tmp_last_tile", FLOAT_P),
    ("blocks_per_ne00", UINT3), ("nrows_x", I32), ("ncols_dst", I32), ("stride_col_dst", I32),
    ("nchannels_y", UINT3), ("stride_channel_dst", I32), ("nsamples_y", UINT3), ("stride_sample_dst", I32),
    ("ntx", UINT3))
I64 = parse_ctype("int64_t")
QUANTIZE_SIGNATURE: tuple[tuple[str, CType], ...] = (
    ("x", parse_ctype("const float*")), ("ids", INT_P), ("vy", VOID_P), ("ne00", I64), ("s01", I64),
    ("s02", I64), ("s03", I64), ("ne0", I64), ("ne1", I32), ("ne2", I32), ("n_expert_used", I32))


@dataclass(frozen=True)
class Config:
    """One CASE line of a config table (ggml_cuda_mmq_config)."""

    fmt: str
    nthreads: int
    occupancy: int
    rows: int  # I: weight rows per tile
    cols: int  # J: activation columns per tile
    sram_layout: str
    k_vram: int
    stream_k: bool
    fallback: bool

    def shared_bytes(self) -> int:
        """mmq_get_nbytes_shared with the MMA data layout (Turing and newer)."""
        y = self.cols * MMQ_BLOCK_BYTES
        pad = self.nthreads * 4
        return self.cols * 4 + self.rows * SRAM_STRIDE[self.sram_layout] * 4 + ceil_div(y, pad) * pad


_CASE = re.compile(r"CASE\(GGML_TYPE_(\w+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*GGML_CUDA_MMQ_SRAM_LAYOUT_(\w+),"
                   r"\s*(\w+),\s*(true|false),\s*(true|false)\)")


def config_table(tree: GgmlTree, relative: str = CONFIG_AMPERE) -> dict[tuple[str, int, bool], Config]:
    """(format, J, fallback) -> Config from the tree's table (the formats strata-bench knows)."""
    path = tree.path(relative)
    if not path.is_file():
        raise InputError(f"--ggml {tree.root}: no {relative}, the mul_mat_q tile configs "
                         "(an unsupported ggml version?)")
    by_name = {name: fmt for fmt, name in TYPE_NAMES.items()}
    k_macros = _macros(tree.path(MMQ_CUH).read_text(errors="replace"))
    table = {}
    for m in _CASE.finditer(path.read_text(errors="replace")):
        fmt = by_name.get(m.group(1))
        if fmt is None or m.group(6) not in SRAM_STRIDE:
            continue
        k_vram = int(m.group(7)) if m.group(7).isdigit() else k_macros.get(m.group(7), 0)
        cfg = Config(fmt, int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)), m.group(6), k_vram,
                     m.group(8) == "true", m.group(9) == "true")
        table[(fmt, cfg.cols, cfg.fallback)] = cfg
    return table


def _macros(text: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"#define\s+(\w+)\s+(\d+)\b", text)}


# The kernels the plans launch, with the parameter lists they pass (tree.lacking_kernel checks them).
KERNELS = (
    (MMQ_CUH, "mul_mat_q", "const char * __restrict__ x, const int * __restrict__ y, const int32_t * __restrict__ "
     "ids_dst, const int32_t * __restrict__ expert_bounds, float * __restrict__ dst, float * __restrict__ tmp_fixup, "
     "const float * __restrict__ y_scale, const uint3 blocks_per_ne00, const int nrows_x, const int ncols_dst, "
     "const int stride_row_x, const int ncols_y, const int stride_col_dst, const uint3 channel_ratio, const uint3 "
     "nchannels_y, const int stride_channel_x, const int stride_channel_y, const int stride_channel_dst, const uint3 "
     "sample_ratio, const uint3 nsamples_y, const int stride_sample_x, const int stride_sample_y, const int "
     "stride_sample_dst, const uint3 ntx"),
    ("src/ggml-cuda/quantize.cu", "quantize_mmq_q8_1", "const float * __restrict__ x, const int32_t * __restrict__ "
     "ids, void * __restrict__ vy, const int64_t ne00, const int64_t s01, const int64_t s02, const int64_t s03, "
     "const int64_t ne0, const int ne1, const int ne2, const int n_expert_used"),
)


def lacking(tree: GgmlTree) -> str | None:
    """None where the tree has what the plans launch; else why not, naming the kernel or file."""
    from strata_bench.ggml.tree import lacking_kernel

    if not tree.path(CONFIG_AMPERE).is_file():
        return f"{CONFIG_AMPERE} is missing: mul_mat_q's tile configs (an unsupported ggml version?)"
    for source, kernel, params in KERNELS:
        why = lacking_kernel(tree.root, source, kernel, params)
        if why is not None:
            return why
    return None


def check_device(major: int, minor: int) -> None:
    """InputError where ggml takes another table than the Ampere one (before Volta; Blackwell's own)."""
    if major < 7 or major >= 10:
        raise InputError(f"--ggml: ggml takes another mul_mat_q tile table than {CONFIG_AMPERE} on compute "
                         f"capability {major}.{minor}; the adapter reads only that one (7.0 to 9.x)")


def choose(table: dict[tuple[str, int, bool], Config], fmt: str, rows: int, ncols: int,
           shared_optin: int) -> Config:
    """mul_mat_q_case and mul_mat_q_switch_J: fallback from the rows, then the J of fewest column tiles."""
    fallback = rows % FALLBACK_ROWS != 0
    best, best_tiles = None, None
    for j in range(J_STEP, J_MAX + 1, J_STEP):
        if best_tiles is not None and best_tiles <= 1:
            break
        cfg = table.get((fmt, j, fallback))
        if cfg is None or cfg.shared_bytes() > shared_optin:
            continue
        tiles = ceil_div(ncols, j)
        if best_tiles is None or tiles < best_tiles:
            best, best_tiles = cfg, tiles
    if best is None:
        raise InputError(f"--ggml: {CONFIG_AMPERE} has no mul_mat_q config for {fmt} that fits "
                         f"{shared_optin} bytes of shared memory")
    return best


def instance_source(fmt: str) -> str:
    """The template instance file that holds mul_mat_q_case<type> for `fmt`."""
    return f"src/ggml-cuda/template-instances/mmq-instance-{fmt}.cu"


def kernel_names(tree: GgmlTree, cfg: Config) -> tuple[str, str]:
    """The main and fixup kernels' name expressions (prec_src1 left at its default, GGML_PREC_Q8)."""
    args = f"(ggml_type){tree.type_ids[cfg.fmt]}, {cfg.cols}, {'true' if cfg.fallback else 'false'}"
    return f"mul_mat_q<{args}>", f"mul_mat_q_stream_k_fixup<{args}>"


def ds_layout(fmt: str) -> str:
    return "DS4" if fmt in DS4_FORMATS else "D2S6" if fmt in D2S6_FORMATS else "D4"


def quantize_name(fmt: str) -> str:
    return f"quantize_mmq_q8_1<(mmq_q8_1_ds_layout){DS_LAYOUT_IDS[ds_layout(fmt)]}, false>"


def padded_k(k: int) -> int:
    return ceil_div(k, ROW_PADDING) * ROW_PADDING


def activation_bytes(k: int, ncols: int, j_max: int) -> int:
    """The q8_1 buffer ggml allocates: every column's padded blocks, then J_max blocks more."""
    return (ncols * padded_k(k) // MMQ_BLOCK_VALUES + j_max) * MMQ_BLOCK_BYTES


@dataclass(frozen=True)
class Args:
    """ggml_cuda_mul_mat_q's mmq_args for one sample, as launch_mul_mat_q passes them on: sizes, and strides
    in weight blocks (x), ints of q8_1 (y) and floats (dst). One weight matrix per channel (channel_ratio 1)."""

    rows: int  # nrows_x: weight rows per matrix (ne01)
    k: int  # ncols_x: values per row (ne00)
    block_values: int  # the format's qk
    ncols: int  # ncols_dst = ncols_y: activation columns, or with ids the token slots (ne_get_rows)
    stride_col_dst: int  # nrows_dst
    channels: int  # nchannels_y: 1, or with ids the experts (the grid's z tiles)
    stride_channel_x: int
    stride_channel_y: int
    stride_channel_dst: int
    stride_sample_x: int
    stride_sample_y: int
    stride_sample_dst: int
    ncols_max: int  # the columns the tiles cover (ntx = ceil(ncols_max / J)); J is chosen by it on NVIDIA too

    @property
    def blocks_k(self) -> int:
        return self.k // self.block_values


def y_ints(k: int) -> int:
    """Ints of block_q8_1 per activation column (k padded to MATRIX_ROW_PADDING): ggml's s12 for ne11 = 1."""
    return padded_k(k) * 36 // (32 * 4)


def dense_args(rows: int, k: int, ncols: int, qk: int) -> Args:
    """Without ids: one matrix of `rows` rows, activations [ncols][k], dst [ncols][rows]."""
    blocks, s12 = rows * (k // qk), ncols * y_ints(k)
    return Args(rows, k, qk, ncols, rows, 1, blocks, s12, rows * ncols, blocks, s12, rows * ncols, ncols)


def expert_args(rows: int, k: int, tokens: int, experts: int, qk: int) -> Args:
    """With ids, one expert a token (n_expert_used 1): src0 [k][rows][experts], src1 [k][1][tokens], dst
    [rows][1][tokens]. The token slots are the columns (ne_get_rows = tokens), each expert a channel of the
    grid (nchannels_y = ne02), src1's channel one token's q8_1 (s12 with ne11 = 1)."""
    per_expert, s12 = rows * (k // qk), y_ints(k)
    return Args(rows, k, qk, tokens, rows, experts, per_expert, s12, rows, experts * per_expert, tokens * s12,
                rows * tokens, tokens)


@dataclass(frozen=True)
class Grid:
    """stream-k's decomposition of one case: the main kernel's blocks and whether the fixup runs."""

    tiles: int
    blocks: int
    fixup: bool


def stream_k_grid(cfg: Config, args: Args, nsm: int) -> Grid:
    """launch_mul_mat_q's stream-k grid: every (row tile, column tile, channel) is a tile, empty or not."""
    tiles = ceil_div(args.rows, cfg.rows) * ceil_div(args.ncols_max, cfg.cols) * args.channels
    waves = ceil_div(tiles, nsm)
    blocks = tiles if 100 * tiles // (nsm * waves) >= TILES_EFFICIENCY else nsm
    return Grid(tiles, blocks, tiles % blocks != 0)


def fixup_floats(cfg: Config, grid: Grid) -> int:
    return grid.blocks * cfg.cols * cfg.rows if grid.fixup else 0


def quantize_plan(fmt: str, k: int, ncols: int, x: Any, xq: Any, ids: Any = 0,
                  strides: tuple[int, int, int] | None = None) -> Launch:
    """quantize_mmq_q8_1_cuda over `ncols` rows of k float32, one channel: row i is x's row ids[i] where ids
    is given (MUL_MAT_ID's gather), with src1's strides s01, s02, s03 (default: rows k floats apart)."""
    kp = padded_k(k)
    s01, s02, s03 = strides or (k, k * ncols, k * ncols)
    values = (x, ids, xq, k, s01, s02, s03, kp, ncols, 1, 0)
    return Launch(quantize_name(fmt), (ncols, ceil_div(kp, 4 * QUANTIZE_THREADS), 1), (QUANTIZE_THREADS, 1, 1),
                  _args(QUANTIZE_SIGNATURE, values))


def plan(tree: GgmlTree, cfg: Config, args: Args, nsm: int, w: Any, xq: Any, dst: Any, tmp: Any,
         ids: tuple[Any, Any] = (0, 0)) -> tuple[Launch, ...]:
    """mul_mat_q (and its fixup where stream-k needs it) as launch_mul_mat_q makes them; `ids` are MUL_MAT_ID's
    ids_dst and expert_bounds (mmid.cu's), null without ids."""
    grid = stream_k_grid(cfg, args, nsm)
    blocks_k, ntx, one = fastdiv(args.blocks_k), fastdiv(ceil_div(args.ncols_max, cfg.cols)), fastdiv(1)
    channels = fastdiv(args.channels)
    main_name, fixup_name = kernel_names(tree, cfg)
    values = (w, xq, *ids, dst, tmp if grid.fixup else 0, 0, blocks_k, args.rows, args.ncols, args.blocks_k,
              args.ncols, args.stride_col_dst, one, channels, args.stride_channel_x, args.stride_channel_y,
              args.stride_channel_dst, one, one, args.stride_sample_x, args.stride_sample_y, args.stride_sample_dst,
              ntx)
    nwarps = cfg.nthreads // WARP
    main = Launch(main_name, (grid.blocks, 1, 1), (WARP, nwarps, 1), _args(MAIN_SIGNATURE, values),
                  cfg.shared_bytes())
    if not grid.fixup:
        return (main,)
    fix = (*ids, dst, tmp, blocks_k, args.rows, args.ncols, args.stride_col_dst, channels, args.stride_channel_dst,
           one, args.stride_sample_dst, ntx)
    return main, Launch(fixup_name, (grid.blocks, cfg.rows // WARP, 1), (WARP, nwarps // 2, 1),
                        _args(FIXUP_SIGNATURE, fix))


def _args(signature: tuple[tuple[str, CType], ...], values: tuple) -> tuple[Argument, ...]:
    return tuple(Argument(label, ctype, v) for (label, ctype), v in zip(signature, values))
