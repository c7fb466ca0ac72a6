// mmvq_row8.cu: a second mat-vec variant of the mmvq family, declared in variants.toml (no Python).
// One warp per row and ROW8_WARPS warps per block, as mmvq_old; but each chunk of the row is decoded
// once and applied to every column (up to 11 accumulators in registers), where mmvq_old decodes it
// again for each column.
//
// Bitwise equal to mmvq_old (kernels_src/mmvq/mmvq.cu, ARITHMETIC CONTRACT): the same lane -> chunk
// mapping (LaneWalk: lane l takes chunks l, l+32, ... in increasing order), the same decode from the
// same global tables, the same chunk_isum and chunk_fma, so each (row, column) sees the same fmaf chain
// from 0.0f; then the same warp_sum_f32 butterfly, and lane 0 stores. Only the loop order changes
// (columns inside chunks), which no rounding depends on.
//
// ABI (docs/ABI.md, "mmvq"): W rows at row_stride bytes with 16 readable bytes after the last row,
// X = [ncols][nchunks] q8_1 blocks (the family quantizes them before this kernel), Y = [ncols][rows].
#include "common/iq_decode.cuh"

using namespace siq;

#ifndef ROW8_WARPS
#define ROW8_WARPS 8
#endif
#define ROW8_MAX_COLS 11  // the family's column limit

template <class F>
__global__ void __launch_bounds__(ROW8_WARPS * 32)
mmvq_row8(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks,
          const block_q8_1* __restrict__ X, int ncols, float* __restrict__ Y) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * ROW8_WARPS + threadIdx.x / 32;
    if (row >= rows) return;  // whole warps only: the butterfly below needs all 32 lanes
    const LaneWalk<F> walk(lane);
    const uint8_t* wrow = W + row * row_stride + walk.first;
    float acc[ROW8_MAX_COLS];
#pragma unroll
    for (int col = 0; col < ROW8_MAX_COLS; ++col) acc[col] = 0.0f;
    for (int c = lane, off = 0; c < nchunks; c += 32, off += LaneWalk<F>::STEP) {
        Chunk ch;
        F::decode(wrow + off, walk.j, global_tab<F>(), ch);
#pragma unroll
        for (int col = 0; col < ROW8_MAX_COLS; ++col) {
            if (col < ncols) {
                int q[8];
                const float d_act = load_q8_1(X + (long long)col * nchunks + c, q);
                acc[col] = chunk_fma(ch, d_act, chunk_isum<F>(ch, q), acc[col]);
            }
        }
    }
#pragma unroll
    for (int col = 0; col < ROW8_MAX_COLS; ++col) {
        if (col < ncols) {  // ncols is the same for every lane: the butterfly stays warp-uniform
            const float sum = warp_sum_f32(acc[col]);
            if (lane == 0) Y[(long long)col * rows + row] = sum;
        }
    }
}
