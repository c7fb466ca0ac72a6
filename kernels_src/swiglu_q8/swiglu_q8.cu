// swiglu_q8.cu: h = silu(gate) * up, quantized to the q8_1 rows a down-projection mat-vec reads.
// old: two kernels (h in FP32 through memory, then quantize); new: one fused kernel.
//
// ARITHMETIC CONTRACT
//   Per element, both variants compute, with explicit intrinsics (no contraction or reassociation):
//     e = expf(-g)                      (CUDA's full-precision expf, max 2 ulp; the same code in both)
//     h = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, e)), u)
//   then quantize each 32 consecutive h of a row with strata_common.cuh's quantize_q8_1_lane (lane i
//   holds element i of the block): amax by warp_max_f32, d = amax / 127 (IEEE), q = roundf(h / d)
//   (0 when amax == 0), stored d and s = fp16(warp_sum_f32 of h), round to nearest even.
//   Why old and new are bitwise equal: the fp32 h is the same function of the same two floats in both
//   (old stores it to memory and reloads it unchanged), and the quantization of each block is the same
//   call with element i in lane i, so every q8_1 byte is the same.
//   Limits of the q8_1 format (not of these kernels): d is inf when amax > 65504 * 127, s is inf when
//   |sum h| rounds above 65504.
//
// LAYOUT: gate[t * ld + i], up[t * ld + i] (i < F, t < T), float32. "split" storage passes two arrays
//   with ld = F; "concat" storage passes one [T, 2F] array (each row: F gate values, then F up values)
//   as gate = base, up = base + F, ld = 2F (what a fused gate/up GEMM with concatenated weight rows
//   writes). q: T rows of F/32 block_q8_1 (36 bytes), row t at q + t * (F/32). F is a multiple of 32
//   (the down type may require more: 64 for Q2_0). h (old only): [T, F] float32 workspace.
#include "common/strata_common.cuh"

namespace swiglu {

constexpr int kWarps = STRATA_SWIGLU_WARPS;  // warps per CTA
constexpr int kBlocksPerWarp = STRATA_SWIGLU_BLOCKS_PER_WARP;  // q8_1 blocks a fused warp converts, loads first (memory in flight)

__device__ __forceinline__ float silu_mul(float g, float u) {
    const float e = expf(-g);
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, e)), u);
}

}  // namespace swiglu

// old, kernel 1: one thread per element. Grid: (ceil(T*F / 256)). Block: (256).
__global__ void __launch_bounds__(STRATA_SWIGLU_H_THREADS)
swiglu_h_f32(const float* __restrict__ gate, const float* __restrict__ up, long long ld, int T, int F,
             float* __restrict__ h) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= (long long)T * F) return;
    const long long t = i / F, col = i - t * F;
    h[i] = swiglu::silu_mul(gate[t * ld + col], up[t * ld + col]);
}

// old, kernel 2: one warp per q8_1 block of h. Grid: (ceil(T*F/32 / 8)). Block: (256).
__global__ void __launch_bounds__(32 * swiglu::kWarps)
quantize_rows_q8_1(const float* __restrict__ h, int T, int F, block_q8_1* __restrict__ q) {
    const long long blk = blockIdx.x * (long long)swiglu::kWarps + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (blk >= (long long)T * (F / 32)) return;  // whole warps leave together
    quantize_q8_1_lane(h[blk * 32 + lane], q + blk, lane);
}

// new: one warp converts kBlocksPerWarp consecutive blocks of one row span; all loads first.
// Grid: (ceil(T*F/32 / (8*kBlocksPerWarp))). Block: (256).
__global__ void __launch_bounds__(32 * swiglu::kWarps)
swiglu_q8_1_fused(const float* __restrict__ gate, const float* __restrict__ up, long long ld, int T, int F,
                  block_q8_1* __restrict__ q) {
    using namespace swiglu;
    const int lane = threadIdx.x & 31;
    const long long nblocks = (long long)T * (F / 32);
    const long long first = (blockIdx.x * (long long)kWarps + (threadIdx.x >> 5)) * kBlocksPerWarp;
    float g[kBlocksPerWarp], u[kBlocksPerWarp];
#pragma unroll
    for (int b = 0; b < kBlocksPerWarp; ++b) {
        const long long blk = first + b;
        g[b] = 0.0f;
        u[b] = 0.0f;
        if (blk < nblocks) {
            const long long t = blk / (F / 32);
            const long long col = (blk - t * (F / 32)) * 32 + lane;
            g[b] = gate[t * ld + col];
            u[b] = up[t * ld + col];
        }
    }
#pragma unroll
    for (int b = 0; b < kBlocksPerWarp; ++b) {
        if (first + b < nblocks) quantize_q8_1_lane(silu_mul(g[b], u[b]), q + first + b, lane);  // warp-uniform
    }
}
