// dequant.cu: quantized rows -> float32, bit-identical to gguf-py's dequantize (the numpy Q2_0
// reference for q2_0).
//
// ARITHMETIC CONTRACT
//   Every value is a product of the fp16 scale (exact in float32) and small factors: sub-scale
//   expressions such as (0.5 + s) * 0.25 or (2s + 1), grid magnitudes <= 62, signs, kvalues <= 127,
//   IQ1's (g +- 1/8). Their significands need at most 11 + 5 + 7 = 23 bits (iq4_xs: d * (scale - 32)
//   * kvalue; 11 + 5 + 6 = 22 for iq2/iq3), and the magnitudes stay within float32's normal range
//   (>= 2^-27 for a subnormal fp16 d), so every float32 product here is exact. Each format still
//   multiplies the same float factors as gguf, left to right as gguf does, and keeps integer factors
//   separate, so zero results also carry gguf's sign (a product's sign is the xor of its factors'
//   signs; an integer product like 0 * -5 would lose it).
// Layout: W rows of `row_stride` bytes (>= the row's blocks), Y [rows][cols] float32. One thread per
//   32-value chunk, 8 float4 stores.
#include "dequant/dequant.cuh"

using namespace siq;

template <class F>
__global__ void __launch_bounds__(STRATA_DEQUANT_THREADS)
dequant_f32(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks, float* __restrict__ Y) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)rows * nchunks) return;
    const long long row = t / nchunks;
    const int c = (int)(t % nchunks);
    float v[32];
    deq::Deq<F>::chunk(W + row * row_stride + (c / F::CHUNKS) * F::BYTES, c % F::CHUNKS, v);
    float4* out = reinterpret_cast<float4*>(Y + t * 32);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
}
