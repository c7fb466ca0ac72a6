// strata_common.cuh: types and helpers every kernel family shares.
//
// Arithmetic contract of the q8_1 activation block (llama.cpp's layout, this project's rounding):
//   per 32 consecutive float inputs x[i]:  amax = max |x[i]| (exact),  d = amax / 127 (IEEE fp32 division,
//   no fast-math), q[i] = amax == 0 ? 0 : roundf(x[i] / d) (IEEE division, round half away from zero),
//   stored d = __float2half_rn(d), s = __float2half_rn(sum x[i]) where the sum is taken in the fixed
//   butterfly order of warp_sum_f32 below. Integer dot products with q are exact; dequantized
//   activations are float(d_half) * q.
#pragma once
#include <cuda_fp16.h>
#ifdef __CUDACC_RTC__
// NVRTC ships no <stdint.h>; these are the LP64 widths every CUDA target uses.
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

#include "formats/q8_1.cuh"
#include "generated/strata_constants.cuh"

#define STRATA_QK8_1 32

struct block_q8_1 {  // formats/q8_1.cuh has the offsets
    __half d;       // scale, fp16
    __half s;       // sum of the raw inputs, fp16 (kept for llama.cpp layout compatibility)
    int8_t qs[32];  // codes
};
static_assert(sizeof(block_q8_1) == layout::q8_1::BYTES, "block_q8_1 must match formats/q8_1.cuh");

// Butterfly sum over a full warp. Its order is fixed (xor 16, 8, 4, 2, 1), which every variant
// that claims bitwise equality must keep.
__device__ __forceinline__ float warp_sum_f32(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max_f32(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ int warp_sum_i32(int v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Quantize one 32-value group held one value per lane (lane i holds x[i]) into a q8_1 block.
// Every lane must call it; lane 0 writes d and s.
__device__ __forceinline__ void quantize_q8_1_lane(float x, block_q8_1* out, int lane) {
    const float amax = warp_max_f32(fabsf(x));
    const float sum = warp_sum_f32(x);
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(x / d);
    out->qs[lane] = (int8_t)q;
    if (lane == 0) {
        out->d = __float2half_rn(d);
        out->s = __float2half_rn(sum);
    }
}

__device__ __forceinline__ float fp16_bits_to_float(uint16_t bits) {
    return __half2float(__ushort_as_half(bits));
}
