// q8_1.cu: float activations -> q8_1 blocks (32 values each), the input format of every integer dot here.
//
// ARITHMETIC CONTRACT (quantize_q8_1_lane in common/strata_common.cuh):
//   amax = max |x| over the 32 values (exact); d = amax / 127 (IEEE fp32 division);
//   q = amax == 0 ? 0 : roundf(x / d) (IEEE division, ties away from zero), |q| <= 127;
//   stored d = fp16(d) round-to-nearest-even; s = fp16(butterfly fp32 sum of the 32 raw values).
//   d and q are exact functions of x (bitwise reproducible in numpy); s carries the sum's rounding.
// Layout: X is [rows][k] float32, k a multiple of 32; block b of the output covers X[32b .. 32b+31]
// of the flattened array, so a row's blocks are contiguous.
#include "common/strata_common.cuh"

// One warp per q8_1 block: lane i quantizes value i.
__global__ void __launch_bounds__(STRATA_Q8_1_WARPS * 32)
quantize_q8_1(const float* __restrict__ X, long long n_blocks, block_q8_1* __restrict__ out) {
    const long long block = (long long)blockIdx.x * STRATA_Q8_1_WARPS + threadIdx.x / 32;
    if (block >= n_blocks) return;  // whole warps: every lane of a live warp takes part in the shuffles
    const int lane = threadIdx.x % 32;
    quantize_q8_1_lane(X[block * 32 + lane], out + block, lane);
}

// Copies the fields of q8_1 blocks into separate arrays (for the q8_1 parity family's comparisons).
__global__ void q8_1_fields(const block_q8_1* __restrict__ blocks, long long n_blocks,
                            __half* __restrict__ d, __half* __restrict__ s, int8_t* __restrict__ qs) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_blocks * 32) return;
    const long long b = i / 32;
    const int lane = (int)(i % 32);
    qs[i] = blocks[b].qs[lane];
    if (lane == 0) {
        d[b] = blocks[b].d;
        s[b] = blocks[b].s;
    }
}
