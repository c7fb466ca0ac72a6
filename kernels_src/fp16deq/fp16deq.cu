// fp16deq.cu: dense dequantization of Q8_0 and IQ4_XS rows to FP16: the generic kernel (one thread per
// 32-value group, element stores) and the 16-byte-store kernel (one thread per 8 outputs).
//
// ARITHMETIC CONTRACT
//   Every output element is the exact value of its weight rounded once to the nearest FP16 (ties to
//   even; magnitudes >= 65520 become +-inf, the IEEE overflow of round-to-nearest).
//   Q8_0:   v = d * q, d an fp16 scale, q an int8. d has an 11-bit significand and |q| <= 128, so d*q
//           has at most 11 + 7 = 18 significant bits (128 is a power of two) and lies in
//           [2^-24, 65504*128]: the fp32 product __fmul_rn(d, q) is exact (no rounding, no fp32
//           subnormal), and __float2half_rn of it is the one rounding.
//   IQ4_XS: v = (d * (ls - 32)) * k, ls a 6-bit sub-block scale, k = kvalues_iq4nl[code] (|k| <= 127).
//           |ls - 32| <= 32 has at most 5 significant bits and |k| at most 7, so the product has at
//           most 11 + 5 + 7 = 23 <= 24 significant bits and magnitude in [2^-24, 65504*32*127]: both
//           fp32 products are exact, in this order, and __float2half_rn is the one rounding.
//   Zero scales give signed zeros (sign of d*(ls-32)*k, as IEEE multiplication defines it).
//   The 16-byte kernel converts pairs with __floats2half2_rn (cvt.rn.f16x2.f32 on sm_80+), which is
//   the same IEEE round-to-nearest-even conversion as __float2half_rn (cvt.rn.f16.f32), so both kernels
//   write the same bits: they form the same exact fp32 value and round it once.
//
// LAYOUT: src points at row 0 of the rows to convert (a row slice is src + row0 * bytes_per_row);
//   rows are contiguous, ncols values each (a multiple of 32 for Q8_0, of 256 for IQ4_XS).
//   dst[row * ld + col] (fp16), ld >= ncols; elements col >= ncols of a row (padding) are not written.
// DISPATCH (done by the caller, strata_bench/families/fp16deq.py): the 16-byte kernel needs dst 16-byte
//   aligned and ld a multiple of 8 (every 8-output store aligned); IQ4_XS also needs src 8-byte aligned
//   (a GGUF tensor's rows are: 136-byte blocks). Anything else takes the generic kernel.
#include "common/strata_common.cuh"
#include "formats/iq4_xs.cuh"
#include "formats/q8_0.cuh"
#include "generated/iq_tables.cuh"

namespace fp16deq {

constexpr int kQ8Bytes = layout::q8_0::BYTES;    // Q8_0 block: fp16 d, int8 qs[32]
constexpr int kXsBytes = layout::iq4_xs::BYTES;  // IQ4_XS block: fp16 d, u16 scales_h, u8 scales_l[4], u8 qs[128]
constexpr int kThreads = STRATA_FP16DEQ_THREADS;

__device__ __forceinline__ float q8_0_exact(float d, int q) { return __fmul_rn(d, (float)q); }

// The 6-bit scale of sub-block ib (0..7) minus 32, times d: exact in fp32.
__device__ __forceinline__ float xs_scale(float d, unsigned scales_h, unsigned scales_l_byte, int ib) {
    const int ls = (int)((scales_l_byte >> (4 * (ib & 1))) & 15u) | (int)(((scales_h >> (2 * ib)) & 3u) << 4);
    return __fmul_rn(d, (float)(ls - 32));
}

__device__ __forceinline__ unsigned pack_halves(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);  // .x = lo goes to the low 16 bits
    return *reinterpret_cast<const unsigned*>(&h);
}

}  // namespace fp16deq

// ------------------------------------------------------------------------------------------------
// Generic kernels: thread g converts 32-value group g (row g / groups_per_row), 2-byte stores.
// Grid: (ceil(nrows * ncols / 32 / 256)). Block: (256).

__global__ void __launch_bounds__(fp16deq::kThreads)
fp16deq_generic_q8_0(const uint8_t* __restrict__ src, int nrows, int ncols, __half* __restrict__ dst, long long ld) {
    using namespace fp16deq;
    const long long gid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int groups = ncols / 32;
    if (gid >= (long long)nrows * groups) return;
    const long long row = gid / groups;
    const int grp = (int)(gid - row * groups);
    const uint8_t* blk = src + (size_t)gid * kQ8Bytes;
    const float d = __half2float(*reinterpret_cast<const __half*>(blk));
    const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
    __half* out = dst + row * ld + (long long)grp * 32;
    for (int j = 0; j < 32; ++j) out[j] = __float2half_rn(q8_0_exact(d, qs[j]));
}

__global__ void __launch_bounds__(fp16deq::kThreads)
fp16deq_generic_iq4_xs(const uint8_t* __restrict__ src, int nrows, int ncols, __half* __restrict__ dst, long long ld) {
    using namespace fp16deq;
    const long long gid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int groups = ncols / 32;
    if (gid >= (long long)nrows * groups) return;
    const long long row = gid / groups;
    const int grp = (int)(gid - row * groups);
    const int ib = grp & 7;
    const uint8_t* blk = src + (size_t)(gid >> 3) * kXsBytes;  // 8 groups per block, rows hold whole blocks
    const float d = __half2float(*reinterpret_cast<const __half*>(blk));
    const unsigned scales_h = (unsigned)blk[2] | ((unsigned)blk[3] << 8);
    const float scale = xs_scale(d, scales_h, blk[4 + (ib >> 1)], ib);
    const uint8_t* qs = blk + 8 + 16 * ib;
    __half* out = dst + row * ld + (long long)grp * 32;
    for (int j = 0; j < 16; ++j) {
        const unsigned b = qs[j];
        out[j] = __float2half_rn(__fmul_rn(scale, (float)kvalues_iq4nl[b & 15u]));
        out[16 + j] = __float2half_rn(__fmul_rn(scale, (float)kvalues_iq4nl[b >> 4]));
    }
}

// ------------------------------------------------------------------------------------------------
// 16-byte-store kernels: thread t converts outputs 8*(t % octets)..+7 of row t / octets and writes them
// with one 16-byte store. Grid: (ceil(nrows * ncols / 8 / 256)). Block: (256).

__global__ void __launch_bounds__(fp16deq::kThreads)
fp16deq_vec16_q8_0(const uint8_t* __restrict__ src, int nrows, int ncols, __half* __restrict__ dst, long long ld) {
    using namespace fp16deq;
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int octets = ncols / 8;
    if (tid >= (long long)nrows * octets) return;
    const long long row = tid / octets;
    const int oct = (int)(tid - row * octets);
    // Blocks are 2-byte aligned (34 bytes), so the 8 codes come as four 16-bit loads.
    const uint8_t* blk = src + (size_t)(tid >> 2) * kQ8Bytes;
    const uint16_t* q16 = reinterpret_cast<const uint16_t*>(blk + 2 + 8 * (oct & 3));
    const float d = __half2float(*reinterpret_cast<const __half*>(blk));
    uint4 out;
    unsigned* words = &out.x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned pair = q16[i];
        const int q0 = (int)(int8_t)(pair & 0xffu), q1 = (int)(int8_t)(pair >> 8);
        words[i] = pack_halves(q8_0_exact(d, q0), q8_0_exact(d, q1));
    }
    *reinterpret_cast<uint4*>(dst + row * ld + 8LL * oct) = out;
}

__global__ void __launch_bounds__(fp16deq::kThreads)
fp16deq_vec16_iq4_xs(const uint8_t* __restrict__ src, int nrows, int ncols, __half* __restrict__ dst, long long ld) {
    using namespace fp16deq;
    // 16 floats in 16 distinct banks: any pattern of codes across a warp is conflict-free.
    __shared__ float kv[16];
    if (threadIdx.x < 16) kv[threadIdx.x] = (float)kvalues_iq4nl[threadIdx.x];
    __syncthreads();
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int octets = ncols / 8;
    if (tid >= (long long)nrows * octets) return;
    const long long row = tid / octets;
    const int oct = (int)(tid - row * octets);
    const int within = (int)(tid & 31);  // 32 octets per 256-value block; rows hold whole blocks
    const int ib = within >> 2, quarter = within & 3;
    const uint8_t* blk = src + (size_t)(tid >> 5) * kXsBytes;
    const uint2 head = *reinterpret_cast<const uint2*>(blk);  // d | scales_h << 16, scales_l[4]
    const float d = __half2float(__ushort_as_half((unsigned short)(head.x & 0xffffu)));
    const float scale = xs_scale(d, head.x >> 16, (head.y >> (8 * (ib >> 1))) & 0xffu, ib);
    // Quarters 0,1: low nibbles of qs[16ib + 8*quarter ..]; quarters 2,3: high nibbles of the same bytes.
    const uint2 q = *reinterpret_cast<const uint2*>(blk + 8 + 16 * ib + 8 * (quarter & 1));
    const int shift = 4 * (quarter >> 1);
    uint4 out;
    unsigned* words = &out.x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned src_word = i < 2 ? q.x : q.y;
        const unsigned c0 = (src_word >> (16 * (i & 1) + shift)) & 15u;
        const unsigned c1 = (src_word >> (16 * (i & 1) + 8 + shift)) & 15u;
        words[i] = pack_halves(__fmul_rn(scale, kv[c0]), __fmul_rn(scale, kv[c1]));
    }
    *reinterpret_cast<uint4*>(dst + row * ld + 8LL * oct) = out;
}
