// pfgemm_old.cu: the existing prompt-expert GEMM (the baseline): dequantize a K chunk of the block's
// weight rows into shared memory as fp16, then nvcuda::wmma 16x16x16 (fp16 inputs, fp32 accumulators).
//
// ARITHMETIC CONTRACT
// - Weights: every value is exact in fp32 and rounded once to fp16, nearest even (pf_common.cuh).
// - Activations: X is fp16 already; it is copied, never converted.
// - Products and sums: each output Y[t, n] is one fp32 wmma accumulator, set to 0 and then updated by
//   one mma_sync per 16-value k step, k steps in ascending order (chunk by chunk, 8 steps a chunk).
//   Inside an mma_sync the hardware forms the 16 fp16 x fp16 products exactly and adds them and the
//   accumulator in its own fixed order and rounding (that order is not IEEE-specified, which is why the
//   float64 tolerance in docs/PFGEMM.md models it as truncating addition).
// - Why the new kernel (pfgemm_new.cu) has the same float64 error: it feeds the same fp16 weights and
//   activations, with the same fragment types and orientation (A = X row-major, B = W column-major),
//   to the same accumulator chain in the same k order, so every output element comes from the same
//   sequence of mma instructions on the same operands. Only the tile shapes, the decoding path and the
//   memory traffic differ.
// - Output: fp32 (the accumulator itself), as a production engine ships it (the next op, SwiGLU or the
//   MoE combine, reads fp32). Rows past the group's end are never written.
//
// Geometry: a block = 128 weight rows of one expert x 32 token rows of that expert's group (TILE_ROWS);
// 8 warps; warp w owns weight rows 16w..16w+15 and both 16-row token fragments (2 accumulators).
// K chunks of 128: IQ2_S through the super-block decoder (one warp a row, 4 values a lane), IQ4_NL and
// Q2_0 with their own block loops; bytes are read one at a time from global memory (the "before" design).
// Shared memory (static): W chunk 128 x 136 fp16 (34,816 B) + X chunk 32 x 136 fp16 (8,704 B) = 43,520 B;
// the per-warp output scratch (8 x 1 KiB) reuses the W chunk after the last k step.
// Requirements (checked by the Python dispatcher): N % 16 == 0, K % 32 == 0 and a whole number of blocks.
#include "pfgemm/pf_common.cuh"

namespace {

constexpr int OLD_ROWS = STRATA_PFGEMM_OLD_ROWS;            // weight rows per block
constexpr int OLD_TILE_ROWS = STRATA_PFGEMM_OLD_TILE_ROWS;  // token rows per block
constexpr int OLD_KC = 128;          // k values per chunk
constexpr int OLD_LD = OLD_KC + 8;   // padded row (halves): row starts move 4 banks apart
constexpr int OLD_THREADS = STRATA_PFGEMM_THREADS;
constexpr int OLD_WARPS = OLD_THREADS / 32;

__device__ __forceinline__ unsigned short load_u16(const unsigned char* p) {
    return (unsigned short)(p[0] | (p[1] << 8));
}

// IQ2_S, one warp a row: lane l decodes values 4l..4l+3 of the row's 128-value chunk.
__device__ void old_dequant_iq2s(const unsigned char* __restrict__ w_rows, size_t row_bytes, int rows_valid,
                                 int k0, __half* s_w) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int r = warp; r < rows_valid; r += OLD_WARPS) {
        const unsigned char* blk = w_rows + (size_t)r * row_bytes + (size_t)(k0 / 256) * pf::IQ2S_BYTES;
        const int j0 = (k0 & 255) + 4 * lane;  // first value of this lane in the super-block
        const int g = j0 >> 3;                 // its group of 8 values
        const unsigned scale_byte = blk[layout::iq2_s::SCALES + g / 4];
        const float dl = pf::iq2s_scale(load_u16(blk), (g & 2) ? scale_byte >> 4 : scale_byte & 15u);
        const unsigned long long grid = iq2s_grid[pf::iq2s_grid_index(blk[layout::iq2_s::QS + g], blk[layout::iq2_s::QH + g / 4], g)];
        const unsigned signs = blk[layout::iq2_s::SIGNS + g];
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int p = (j0 & 7) + i;
            const float mag = dl * (float)((grid >> (8 * p)) & 0xff);
            v[i] = ((signs >> p) & 1u) ? -mag : mag;
        }
        __half2* dst = reinterpret_cast<__half2*>(s_w + r * OLD_LD + 4 * lane);
        dst[0] = __floats2half2_rn(v[0], v[1]);
        dst[1] = __floats2half2_rn(v[2], v[3]);
    }
}

// IQ4_NL: one thread a 32-value block per iteration.
__device__ void old_dequant_iq4nl(const unsigned char* __restrict__ w_rows, size_t row_bytes, int rows_valid,
                                  int k0, int kc, __half* s_w) {
    const int blocks_per_row = kc / 32;
    for (int item = threadIdx.x; item < rows_valid * blocks_per_row; item += OLD_THREADS) {
        const int r = item / blocks_per_row, b = item % blocks_per_row;
        const unsigned char* blk = w_rows + (size_t)r * row_bytes + (size_t)(k0 / 32 + b) * pf::IQ4NL_BYTES;
        const float d = __half2float(__ushort_as_half(load_u16(blk)));
        __half* dst = s_w + r * OLD_LD + 32 * b;
        for (int i = 0; i < 16; ++i) {
            const unsigned q = blk[2 + i];
            dst[i] = __float2half_rn(d * (float)kvalues_iq4nl[q & 15u]);
            dst[16 + i] = __float2half_rn(d * (float)kvalues_iq4nl[q >> 4]);
        }
    }
}

// Q2_0: one thread a 64-value block per iteration; element j = d * (2q - 3), q from qs[j % 16].
__device__ void old_dequant_q20(const unsigned char* __restrict__ w_rows, size_t row_bytes, int rows_valid,
                                int k0, int kc, __half* s_w) {
    const int blocks_per_row = kc / 64;
    for (int item = threadIdx.x; item < rows_valid * blocks_per_row; item += OLD_THREADS) {
        const int r = item / blocks_per_row, b = item % blocks_per_row;
        const unsigned char* blk = w_rows + (size_t)r * row_bytes + (size_t)(k0 / 64 + b) * pf::Q20_BYTES;
        const float d = __half2float(__ushort_as_half(load_u16(blk)));
        __half* dst = s_w + r * OLD_LD + 64 * b;
        for (int j = 0; j < 64; ++j) {
            const int q = (blk[2 + (j & 15)] >> (2 * (j >> 4))) & 3;
            dst[j] = __float2half_rn(d * (float)(2 * q - 3));
        }
    }
}

template <int FMT>
__device__ __forceinline__ size_t old_row_bytes(int K) {
    if (FMT == pf::FMT_IQ2_S) return (size_t)(K / 256) * pf::IQ2S_BYTES;
    if (FMT == pf::FMT_IQ4_NL) return (size_t)(K / 32) * pf::IQ4NL_BYTES;
    return (size_t)(K / 64) * pf::Q20_BYTES;
}

}  // namespace

// Grid: x = weight-row tiles (ceil(N / 128)), y = token tiles (sum over experts of ceil(group / 32), or more).
template <int FMT>
__global__ void __launch_bounds__(OLD_THREADS)
pfgemm_old(const __half* __restrict__ X, const unsigned char* __restrict__ W, const int* __restrict__ offsets,
           float* __restrict__ Y, int N, int K, int n_experts) {
    using namespace nvcuda;
    __shared__ __align__(32) __half s_w[OLD_ROWS * OLD_LD];
    __shared__ __align__(32) __half s_x[OLD_TILE_ROWS * OLD_LD];
    __shared__ int s_info[3];

    if (threadIdx.x < 32) pf::locate_tile<OLD_TILE_ROWS>(offsets, n_experts, blockIdx.y, s_info);
    __syncthreads();
    const int expert = s_info[0];
    if (expert < 0) return;
    const int row0 = s_info[1], row_end = s_info[2];
    const int n0 = blockIdx.x * OLD_ROWS;
    const int rows_valid = min(OLD_ROWS, N - n0);
    const size_t row_bytes = old_row_bytes<FMT>(K);
    const unsigned char* w_rows = W + ((size_t)expert * N + n0) * row_bytes;
    const int warp = threadIdx.x >> 5;
    const bool warp_has_rows = 16 * warp < rows_valid;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);

    for (int k0 = 0; k0 < K; k0 += OLD_KC) {
        const int kc = min(OLD_KC, K - k0);
        if (FMT == pf::FMT_IQ2_S) old_dequant_iq2s(w_rows, row_bytes, rows_valid, k0, s_w);
        if (FMT == pf::FMT_IQ4_NL) old_dequant_iq4nl(w_rows, row_bytes, rows_valid, k0, kc, s_w);
        if (FMT == pf::FMT_Q2_0) old_dequant_q20(w_rows, row_bytes, rows_valid, k0, kc, s_w);
        for (int i = threadIdx.x; i < OLD_TILE_ROWS * kc; i += OLD_THREADS) {
            const int r = i / kc, c = i % kc;
            s_x[r * OLD_LD + c] = row0 + r < row_end ? X[(size_t)(row0 + r) * K + k0 + c] : __float2half(0.0f);
        }
        __syncthreads();
        if (warp_has_rows) {
            for (int ks = 0; ks < kc / 16; ++ks) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
                wmma::load_matrix_sync(b, s_w + 16 * warp * OLD_LD + 16 * ks, OLD_LD);
#pragma unroll
                for (int f = 0; f < 2; ++f) {
                    if (row0 + 16 * f >= row_end) continue;  // no token row of the group in this fragment
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
                    wmma::load_matrix_sync(a, s_x + 16 * f * OLD_LD + 16 * ks, OLD_LD);
                    wmma::mma_sync(acc[f], a, b, acc[f]);
                }
            }
        }
        __syncthreads();
    }

    // The W chunk is free now: it becomes 8 per-warp scratch tiles for the group's last partial tile.
    float* scratch = reinterpret_cast<float*>(s_w) + warp * pf::WMMA_TILE * pf::WMMA_TILE;
    if (!warp_has_rows) return;
#pragma unroll
    for (int f = 0; f < 2; ++f) {
        if (row0 + 16 * f < row_end)
            pf::store_tile(acc[f], Y, N, row0 + 16 * f, n0 + 16 * warp, row_end, scratch);
    }
}
