// grouped.cu: mixture-of-experts FFN over token entries sorted by expert.
//   gate/up: H[i][f] = silu(gate_e[f] . x_i) * (up_e[f] . x_i)      for every entry i of expert e's group
//   down:    Y[i][o] = down_e[o] . q8_1(H_i)
// Groups: entries offsets[e] .. offsets[e+1]-1 belong to expert e (empty groups allowed). Activations
// (x, then H) are quantized to q8_1 per entry row by quantize_q8_1 (q8_1.cu) before each kernel.
// Weights: expert e's matrix starts at e * expert_stride bytes; its rows are row_stride bytes apart
// (a multiple of 16), with 16 readable bytes after the last row (the decoders' aligned loads).
//
// ARITHMETIC CONTRACT
//   Each dot (gate_e[f] . x_i, up_e[f] . x_i, down_e[o] . hq_i) is computed exactly as one mmvq output
//   (mmvq.cu): lane l takes chunks l, l+32, ... in order, acc = fmaf(dw * d_act, (float)isum, acc)
//   from 0.0f, then warp_sum_f32's butterfly. SwiGLU in fp32, one expression in both variants:
//   h = (g / (1.0f + expf(-g))) * u with IEEE division and CUDA's expf (not __expf).
// Why old and new are bitwise equal: `old` computes every entry's dots separately, decoding each
//   weight chunk again per entry; `new` decodes a chunk of R rows once and applies it to the up to 4
//   entries of a pass. Per (row, entry) the chunk order, every float operation and the reduction tree
//   are the same, and the integer isum does not depend on where the tables live.
#include "common/iq_decode.cuh"

using namespace siq;

// At least 4 blocks per SM (<= 128 registers): with no minimum, ptxas chose 56 registers and a spill for
// grouped_down_new<iq4_xs>.
#define GROUPED_MIN_BLOCKS 4

__device__ __forceinline__ float silu_mul(float g, float u) { return (g / (1.0f + expf(-g))) * u; }

// One warp's dot of a weight row with one q8_1 activation row (the old kernels' building block).
template <class F>
__device__ __forceinline__ float row_dot(const uint8_t* row_lane, const LaneWalk<F>& walk, int nchunks,
                                         const block_q8_1* x, int lane) {
    float acc = 0.0f;
    for (int c = lane, off = 0; c < nchunks; c += 32, off += LaneWalk<F>::STEP) {
        Chunk ch;
        F::decode(row_lane + off, walk.j, global_tab<F>(), ch);
        int q[8];
        const float d_act = load_q8_1(x + c, q);
        acc = chunk_fma(ch, d_act, chunk_isum<F>(ch, q), acc);
    }
    return warp_sum_f32(acc);
}

// OLD gate/up: one warp per (expert, row f); for each entry the gate and up rows are re-read and
// re-decoded. grid = (ceil(d_ff / STRATA_GROUPED_WARPS), n_experts).
template <class F>
__global__ void __launch_bounds__(STRATA_GROUPED_WARPS * 32, GROUPED_MIN_BLOCKS)
grouped_gateup_old(const uint8_t* __restrict__ gate, const uint8_t* __restrict__ up, long long row_stride,
                   long long expert_stride, int d_ff, int nchunks, const int* __restrict__ offsets,
                   const block_q8_1* __restrict__ XQ, float* __restrict__ H) {
    const int lane = threadIdx.x % 32;
    const int e = blockIdx.y;
    const int f = blockIdx.x * STRATA_GROUPED_WARPS + threadIdx.x / 32;
    if (f >= d_ff) return;
    const LaneWalk<F> walk(lane);
    const long long base = e * expert_stride + f * row_stride + walk.first;
    for (int i = offsets[e]; i < offsets[e + 1]; ++i) {
        const block_q8_1* x = XQ + (long long)i * nchunks;
        const float g = row_dot<F>(gate + base, walk, nchunks, x, lane);
        const float u = row_dot<F>(up + base, walk, nchunks, x, lane);
        if (lane == 0) H[(long long)i * d_ff + f] = silu_mul(g, u);
    }
}

// OLD down: one warp per (expert, output row o), one dot per entry.
template <class F>
__global__ void __launch_bounds__(STRATA_GROUPED_WARPS * 32, GROUPED_MIN_BLOCKS)
grouped_down_old(const uint8_t* __restrict__ down, long long row_stride, long long expert_stride, int d_out,
                 int nchunks, const int* __restrict__ offsets, const block_q8_1* __restrict__ HQ,
                 float* __restrict__ Y) {
    const int lane = threadIdx.x % 32;
    const int e = blockIdx.y;
    const int o = blockIdx.x * STRATA_GROUPED_WARPS + threadIdx.x / 32;
    if (o >= d_out) return;
    const LaneWalk<F> walk(lane);
    const uint8_t* row = down + e * expert_stride + o * row_stride + walk.first;
    for (int i = offsets[e]; i < offsets[e + 1]; ++i) {
        const float y = row_dot<F>(row, walk, nchunks, HQ + (long long)i * nchunks, lane);
        if (lane == 0) Y[(long long)i * d_out + o] = y;
    }
}

// Shared memory of the new kernels: the table (static), STRATA_GROUPED_ENTRIES rows of q8_1 activations
// (dynamic).
// Stage the activations of entries first .. first+n-1 (n <= STRATA_GROUPED_ENTRIES) into shared memory.
__device__ __forceinline__ void stage_entries(const block_q8_1* src, int nchunks, int n, block_q8_1* dst) {
    const uint32_t* from = reinterpret_cast<const uint32_t*>(src);
    uint32_t* to = reinterpret_cast<uint32_t*>(dst);
    for (int i = threadIdx.x; i < n * nchunks * 9; i += blockDim.x) to[i] = from[i];
}

// NEW gate/up: each warp owns R rows of gate and of up; per pass of up to 4 entries a chunk of those
// 2R rows is decoded once and applied to every entry of the pass. grid = (ceil(d_ff / (WARPS*R)), E).
template <class F, int R>
__global__ void __launch_bounds__(STRATA_GROUPED_WARPS * 32, GROUPED_MIN_BLOCKS)
grouped_gateup_new(const uint8_t* __restrict__ gate, const uint8_t* __restrict__ up, long long row_stride,
                   long long expert_stride, int d_ff, int nchunks, const int* __restrict__ offsets,
                   const block_q8_1* __restrict__ XQ, float* __restrict__ H) {
    __shared__ uint32_t staged[SharedTab<F>::WORDS];
    extern __shared__ uint32_t smem[];
    block_q8_1* xs = reinterpret_cast<block_q8_1*>(smem);
    stage_table<F>(staged);
    const int lane = threadIdx.x % 32;
    const int e = blockIdx.y;
    const int f0 = (blockIdx.x * STRATA_GROUPED_WARPS + threadIdx.x / 32) * R;
    const LaneWalk<F> walk(lane);
    const uint8_t* gr[R];
    const uint8_t* ur[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const long long base = e * expert_stride + min(f0 + r, d_ff - 1) * row_stride + walk.first;
        gr[r] = gate + base;
        ur[r] = up + base;
    }
    const int end = offsets[e + 1];
    for (int first = offsets[e]; first < end; first += STRATA_GROUPED_ENTRIES) {
        const int n = min(STRATA_GROUPED_ENTRIES, end - first);
        __syncthreads();  // the previous pass is done with xs (and the table is staged on the first)
        stage_entries(XQ + (long long)first * nchunks, nchunks, n, xs);
        __syncthreads();
        const Tab tab = shared_tab<F>(staged);
        float acc_g[R][STRATA_GROUPED_ENTRIES], acc_u[R][STRATA_GROUPED_ENTRIES];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int k = 0; k < STRATA_GROUPED_ENTRIES; ++k) acc_g[r][k] = acc_u[r][k] = 0.0f;
        for (int c = lane, off = 0; c < nchunks; c += 32, off += LaneWalk<F>::STEP) {
            Chunk cg[R], cu[R];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                F::decode(gr[r] + off, walk.j, tab, cg[r]);
                F::decode(ur[r] + off, walk.j, tab, cu[r]);
            }
#pragma unroll
            for (int k = 0; k < STRATA_GROUPED_ENTRIES; ++k) {
                if (k < n) {
                    int q[8];
                    const float d_act = load_q8_1(xs + k * nchunks + c, q);
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        acc_g[r][k] = chunk_fma(cg[r], d_act, chunk_isum<F>(cg[r], q), acc_g[r][k]);
                        acc_u[r][k] = chunk_fma(cu[r], d_act, chunk_isum<F>(cu[r], q), acc_u[r][k]);
                    }
                }
            }
        }
#pragma unroll
        for (int k = 0; k < STRATA_GROUPED_ENTRIES; ++k) {
            if (k < n) {
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const float g = warp_sum_f32(acc_g[r][k]);
                    const float u = warp_sum_f32(acc_u[r][k]);
                    if (lane == 0 && f0 + r < d_ff) H[(long long)(first + k) * d_ff + f0 + r] = silu_mul(g, u);
                }
            }
        }
    }
}

// NEW down: R rows per warp, each chunk decoded once per pass of up to 4 entries.
template <class F, int R>
__global__ void __launch_bounds__(STRATA_GROUPED_WARPS * 32, GROUPED_MIN_BLOCKS)
grouped_down_new(const uint8_t* __restrict__ down, long long row_stride, long long expert_stride, int d_out,
                 int nchunks, const int* __restrict__ offsets, const block_q8_1* __restrict__ HQ,
                 float* __restrict__ Y) {
    __shared__ uint32_t staged[SharedTab<F>::WORDS];
    extern __shared__ uint32_t smem[];
    block_q8_1* xs = reinterpret_cast<block_q8_1*>(smem);
    stage_table<F>(staged);
    const int lane = threadIdx.x % 32;
    const int e = blockIdx.y;
    const int o0 = (blockIdx.x * STRATA_GROUPED_WARPS + threadIdx.x / 32) * R;
    const LaneWalk<F> walk(lane);
    const uint8_t* wr[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
        wr[r] = down + e * expert_stride + min(o0 + r, d_out - 1) * row_stride + walk.first;
    const int end = offsets[e + 1];
    for (int first = offsets[e]; first < end; first += STRATA_GROUPED_ENTRIES) {
        const int n = min(STRATA_GROUPED_ENTRIES, end - first);
        __syncthreads();
        stage_entries(HQ + (long long)first * nchunks, nchunks, n, xs);
        __syncthreads();
        const Tab tab = shared_tab<F>(staged);
        float acc[R][STRATA_GROUPED_ENTRIES];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int k = 0; k < STRATA_GROUPED_ENTRIES; ++k) acc[r][k] = 0.0f;
        for (int c = lane, off = 0; c < nchunks; c += 32, off += LaneWalk<F>::STEP) {
            Chunk ch[R];
#pragma unroll
            for (int r = 0; r < R; ++r) F::decode(wr[r] + off, walk.j, tab, ch[r]);
#pragma unroll
            for (int k = 0; k < STRATA_GROUPED_ENTRIES; ++k) {
                if (k < n) {
                    int q[8];
                    const float d_act = load_q8_1(xs + k * nchunks + c, q);
#pragma unroll
                    for (int r = 0; r < R; ++r) acc[r][k] = chunk_fma(ch[r], d_act, chunk_isum<F>(ch[r], q), acc[r][k]);
                }
            }
        }
#pragma unroll
        for (int k = 0; k < STRATA_GROUPED_ENTRIES; ++k) {
            if (k < n) {
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const float y = warp_sum_f32(acc[r][k]);
                    if (lane == 0 && o0 + r < d_out) Y[(long long)(first + k) * d_out + o0 + r] = y;
                }
            }
        }
    }
}
