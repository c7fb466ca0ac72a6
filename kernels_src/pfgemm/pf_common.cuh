// pf_common.cuh: what both prompt-expert GEMM kernels (pfgemm_old.cu, pfgemm_new.cu) share.
//
// Problem: token rows are sorted by expert; offsets[e] .. offsets[e+1] are expert e's rows. For every
// expert e and token row t of its group:  Y[t, n] = sum_k X[t, k] * W_e[n, k]  (n < N, k < K), with
// X fp16 [T, K] row-major, W_e quantized rows (N rows of K values, expert e's rows at byte
// e * N * row_bytes), Y fp32 [T, N] row-major. Tensor cores (nvcuda::wmma 16x16x16, fp16 inputs, fp32
// accumulators): C = A * B with A = X tile (tokens x k, row-major) and B = W tile viewed as k x n
// (column-major, i.e. W rows in shared memory), C stored row-major into Y. Both kernels use exactly
// this orientation so that every output element sees the same mma instruction sequence.
//
// Weight -> fp16 (the one rounding of the weights, shared by both kernels): every format here has exact
// fp32 values (IQ2_S: d * (0.5 + s) * 0.25 * g has at most 11 + 5 + 6 = 22 significant bits; IQ4_NL:
// d * kvalue at most 11 + 7; Q2_0: d * (2q - 3) at most 11 + 2), so the value is computed exactly in fp32
// in any operation order and rounded once, to nearest even, to fp16 (__float2half_rn / __floats2half2_rn;
// a negated value rounds to the negated fp16, so signs may be applied before or after rounding).
#pragma once
#include <cuda_fp16.h>
#include <mma.h>

#include "generated/iq_tables.cuh"
#include "generated/strata_constants.cuh"
#include "formats/iq2_s.cuh"
#include "formats/iq4_nl.cuh"
#include "formats/q2_0.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "pfgemm needs tensor cores (wmma, sm_70 or newer)"
#endif

namespace pf {

// Format ids: the template argument of both kernels (and of the Python family's name expressions).
constexpr int FMT_IQ2_S = STRATA_PFGEMM_FMT_IQ2_S;
constexpr int FMT_IQ4_NL = STRATA_PFGEMM_FMT_IQ4_NL;
constexpr int FMT_Q2_0 = STRATA_PFGEMM_FMT_Q2_0;

constexpr int IQ2S_BYTES = layout::iq2_s::BYTES;    // d, qs[32] grid low bytes, signs[32], qh[8], scales[8]; 256 values
constexpr int IQ4NL_BYTES = layout::iq4_nl::BYTES;  // d, qs[16] nibbles; 32 values
constexpr int Q20_BYTES = layout::q2_0::BYTES;     // d, qs[16] 2-bit codes; 64 values
constexpr int WMMA_TILE = 16;

// Where this block's token tile is. Token tiles are numbered expert by expert (each expert has
// ceil(group / TILE_ROWS) of them), so a block finds its expert with a warp-wide prefix sum over the
// group sizes: no host-side tile table, and a grid larger than the tile count is harmless (the extra
// blocks find expert -1 and leave). Called by warp 0 only; writes {expert, first row, group end}.
template <int TILE_ROWS>
__device__ __forceinline__ void locate_tile(const int* __restrict__ offsets, int n_experts, int tile,
                                            int* s_info) {
    const int lane = threadIdx.x & 31;
    int tiles_before = 0;
    for (int e0 = 0; e0 < n_experts; e0 += 32) {
        const int e = e0 + lane;
        int start = 0, count = 0;
        if (e < n_experts) {
            start = offsets[e];
            count = offsets[e + 1] - start;
        }
        const int tiles = (count + TILE_ROWS - 1) / TILE_ROWS;
        int inclusive = tiles;
#pragma unroll
        for (int step = 1; step < 32; step <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, inclusive, step);
            if (lane >= step) inclusive += v;
        }
        const int first = tiles_before + inclusive - tiles;
        const bool mine = tile >= first && tile < tiles_before + inclusive;
        if (__ballot_sync(0xffffffffu, mine)) {
            if (mine) {
                s_info[0] = e;
                s_info[1] = start + (tile - first) * TILE_ROWS;
                s_info[2] = start + count;
            }
            return;
        }
        tiles_before += __shfl_sync(0xffffffffu, inclusive, 31);
    }
    if (lane == 0) s_info[0] = -1;
}

// --- exact weight values (fp32) -----------------------------------------------------------------

// IQ2_S sub-block scale: d * (0.5 + s) * 0.25, exact in fp32 (see the header comment).
__device__ __forceinline__ float iq2s_scale(unsigned short d_bits, unsigned nibble) {
    return __half2float(__ushort_as_half(d_bits)) * (0.5f + (float)nibble) * 0.25f;
}

// IQ2_S grid index of group g (0..31): low byte qs[g], bits 8-9 from qh[g / 4] bits 2*(g % 4).
__device__ __forceinline__ unsigned iq2s_grid_index(unsigned qs_byte, unsigned qh_byte, int g) {
    return qs_byte | (((qh_byte >> (2 * (g & 3))) & 3u) << 8);
}

// Store one 16x16 fp32 accumulator tile at token rows [t0, t0 + 16) x columns [n, n + 16) of Y.
// A tile whose rows all belong to the group goes straight to global memory; the group's last,
// partial tile goes through this warp's shared scratch (256 floats) and only its valid rows are copied.
template <typename Frag>
__device__ __forceinline__ void store_tile(const Frag& acc, float* __restrict__ Y, int N, int t0, int n,
                                           int row_end, float* scratch) {
    using namespace nvcuda;
    if (t0 + WMMA_TILE <= row_end) {
        wmma::store_matrix_sync(Y + (size_t)t0 * N + n, acc, N, wmma::mem_row_major);
        return;
    }
    wmma::store_matrix_sync(scratch, acc, WMMA_TILE, wmma::mem_row_major);
    __syncwarp();
    const int lane = threadIdx.x & 31;
    for (int e = lane; e < WMMA_TILE * WMMA_TILE; e += 32) {
        const int r = e / WMMA_TILE, c = e % WMMA_TILE;
        if (t0 + r < row_end) Y[(size_t)(t0 + r) * N + n + c] = scratch[e];
    }
    __syncwarp();
}

}  // namespace pf
