// fp16deq.cu: dense dequantization of Q8_0 and IQ4_XS rows to FP16: the generic kernel (one thread per
// 32-value group, element stores) and the 16-byte-store kernels (Q8_0: one thread per 8 outputs; IQ4_XS:
// the wide kernel with 16 outputs per thread). The wide kernel's other forms that experiments/fp16deq_tune
// times (8-32 outputs per thread, the strided mapping) instantiate the same template; its prmt lookup and a
// wide Q8_0 kernel live in experiments/fp16deq_tune/kernels/fp16deq_wide.cu.
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
//   The wide candidates form the same two fp32 products (or one for Q8_0) in the same order; the prmt
//   lookup's k (experiments/fp16deq_tune) is the same float as kvalues_iq4nl[code] (an exact integer
//   difference, see below).
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

// Eight codes (nibble `shift` of q's eight bytes) -> eight outputs through the shared float table.
__device__ __forceinline__ uint4 pack8_shared(float scale, uint2 q, int shift, const float* kv) {
    uint4 out;
    unsigned* words = &out.x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned src_word = i < 2 ? q.x : q.y;
        const unsigned c0 = (src_word >> (16 * (i & 1) + shift)) & 15u;
        const unsigned c1 = (src_word >> (16 * (i & 1) + 8 + shift)) & 15u;
        words[i] = pack_halves(__fmul_rn(scale, kv[c0]), __fmul_rn(scale, kv[c1]));
    }
    return out;
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

// IQ4_XS's 16-byte-store path is fp16deq_wide_iq4_xs<16, kXsOwn, kLutShared> below (16 outputs a thread:
// 91-94% of the H200's copy ceiling where 8 a thread reached 75-77%; families/fp16deq.py VEC16_WIDE).

// ------------------------------------------------------------------------------------------------
// Wide 16-byte-store kernels (experiments/fp16deq_tune times them all; "new" launches the one VEC16_WIDE
// names for IQ4_XS): the same per-value arithmetic as fp16deq_vec16_q8_0, OUT outputs per thread.
//   MAP kXsOwn:     thread t owns OUT/16 halves of a sub-block's 16 qs bytes (8-byte loads: a block is
//                   only 8-byte aligned, 136 = 8 * 17, so a 16-byte qs load would be misaligned in every
//                   other block) and writes their low nibbles' 8 outputs and high nibbles' 8 outputs; the
//                   head is read once per thread. OUT = 16: one half, two stores 32 bytes apart;
//                   OUT = 32: one whole sub-block, four stores. Every 32-byte sector of a store instruction
//                   is written whole by two lanes (OUT = 16) or half by one lane (OUT = 32).
//   MAP kXsStrided: the vec16 kernel's octet work done OUT/8 times, octet k of lane l of warp w being
//                   (w * OUT/8 + k) * 32 + l: each store instruction writes 512 consecutive bytes.
//   LUT kLutShared: kvalues as floats in shared memory (one __syncthreads).
//   LUT kLutPrmt:   kvalues + 128 as bytes in four registers, looked up eight codes at a time with prmt
//                   (no shared memory, no barrier); byte u becomes the float k = (2^23 + u) - (2^23 + 128),
//                   exact (both operands and the difference are integers below 2^24), so the products
//                   scale * k are the vec16 kernel's products, bit for bit. Its XsLut and XsLutInit are
//                   experiments/fp16deq_tune/kernels/fp16deq_wide.cu's: "new" never runs it.
// Grid: (ceil(nrows * ncols / OUT / 256)). Block: (256). Same DISPATCH rules as the vec16 kernels.

namespace fp16deq {

constexpr int kXsOwn = 0, kXsStrided = 1;
constexpr int kLutShared = 0, kLutPrmt = 1;
// kLutPrmt's table (experiments/fp16deq_tune/kernels/fp16deq_wide.cu uses it): kvalues_iq4nl[i] + 128
// (1..241), byte i % 4 of word i / 4 (experiments/fp16deq_tune/tests checks them). Kept here although no
// built-in kernel reads them: NVRTC emits namespace-scope constants into the module's global data, so
// dropping them would move the built-in kernels' globals (their cubins would differ).
constexpr unsigned kKvBiased[4] = {0x3f2d1801u, 0x766a5d4fu, 0xa6998d81u, 0xf1d9c5b5u};
constexpr unsigned kMagic = 0x4b000000u;     // 2^23 as float bits: 2^23 + u for a byte u in the low byte
constexpr float kMagicBias = 8388736.0f;     // 2^23 + 128

template <int LUT> struct XsLut;

template <> struct XsLut<kLutShared> {
    const float* kv;
    __device__ __forceinline__ uint4 octet(float scale, uint2 q, int shift) const {
        return pack8_shared(scale, q, shift, kv);
    }
    __device__ __forceinline__ void both(float scale, uint2 q, uint4& lo, uint4& hi) const {
        lo = pack8_shared(scale, q, 0, kv);
        hi = pack8_shared(scale, q, 4, kv);
    }
};

__device__ __forceinline__ float xs_block_scale(uint2 head, int ib) {
    const float d = __half2float(__ushort_as_half((unsigned short)(head.x & 0xffffu)));
    return xs_scale(d, head.x >> 16, (head.y >> (8 * (ib >> 1))) & 0xffu, ib);
}

// The fp16 output of value `col` of block `blk` (blocks counted from row 0, bpr per row).
__device__ __forceinline__ __half* xs_out(__half* dst, long long ld, long long blk, int bpr, int col) {
    const long long row = blk / bpr;
    return dst + row * ld + 256LL * (blk - row * bpr) + col;
}

// kXsOwn: halves h0 .. h0 + HALVES - 1 of sub-block ib of block blk.
template <int HALVES, int LUT>
__device__ __forceinline__ void xs_own(const uint8_t* src, long long blk, int ib, int h0, int bpr, __half* dst,
                                       long long ld, XsLut<LUT> lut) {
    const uint8_t* b = src + (size_t)blk * kXsBytes;
    const uint2 head = *reinterpret_cast<const uint2*>(b);
    uint2 q[HALVES];
#pragma unroll
    for (int h = 0; h < HALVES; ++h) q[h] = *reinterpret_cast<const uint2*>(b + 8 + 16 * ib + 8 * (h0 + h));
    const float scale = xs_block_scale(head, ib);
    __half* out = xs_out(dst, ld, blk, bpr, 32 * ib + 8 * h0);
#pragma unroll
    for (int h = 0; h < HALVES; ++h) {
        uint4 lo, hi;
        lut.both(scale, q[h], lo, hi);
        *reinterpret_cast<uint4*>(out + 8 * h) = lo;       // low nibbles: values 8 * (h0 + h) ..
        *reinterpret_cast<uint4*>(out + 16 + 8 * h) = hi;  // high nibbles: 16 values later
    }
}

// kXsStrided: the vec16 kernel's work for octet `oct` (32 per block).
template <int LUT>
__device__ __forceinline__ void xs_octet(const uint8_t* src, long long oct, int bpr, __half* dst, long long ld,
                                         XsLut<LUT> lut) {
    const long long blk = oct >> 5;
    const int within = (int)(oct & 31), ib = within >> 2, quarter = within & 3;
    const uint8_t* b = src + (size_t)blk * kXsBytes;
    const uint2 head = *reinterpret_cast<const uint2*>(b);
    const uint2 q = *reinterpret_cast<const uint2*>(b + 8 + 16 * ib + 8 * (quarter & 1));
    const uint4 out = lut.octet(xs_block_scale(head, ib), q, 4 * (quarter >> 1));
    *reinterpret_cast<uint4*>(xs_out(dst, ld, blk, bpr, 8 * within)) = out;
}

template <int LUT> struct XsLutInit;
template <> struct XsLutInit<kLutShared> {
    __device__ __forceinline__ static XsLut<kLutShared> make(float* kv) {
        if (threadIdx.x < 16) kv[threadIdx.x] = (float)kvalues_iq4nl[threadIdx.x];
        __syncthreads();
        return XsLut<kLutShared>{kv};
    }
};
}  // namespace fp16deq

template <int OUT, int MAP, int LUT>
__global__ void __launch_bounds__(fp16deq::kThreads)
fp16deq_wide_iq4_xs(const uint8_t* __restrict__ src, int nrows, int ncols, __half* __restrict__ dst, long long ld) {
    using namespace fp16deq;
    static_assert(OUT == 8 || OUT == 16 || OUT == 32, "OUT: 8, 16 or 32 outputs per thread");
    static_assert(MAP == kXsOwn || OUT > 8, "OUT = 8 is the vec16 mapping: use kXsOwn");
    __shared__ float kv[LUT == kLutShared ? 16 : 1];
    const XsLut<LUT> lut = XsLutInit<LUT>::make(kv);
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int bpr = ncols / 256;
    const long long blocks = (long long)nrows * bpr;
    if (MAP == kXsStrided) {
        constexpr int K = OUT / 8;
        const long long first = (tid >> 5) * (32LL * K) + (tid & 31);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const long long oct = first + 32LL * k;
            if ((oct >> 5) < blocks) xs_octet(src, oct, bpr, dst, ld, lut);
        }
    } else if (OUT == 8) {
        if ((tid >> 5) < blocks) xs_octet(src, tid, bpr, dst, ld, lut);
    } else {
        constexpr int HALVES = OUT >= 16 ? OUT / 16 : 1, PER_BLOCK = 256 / OUT;  // threads per 256-value block
        const long long blk = tid / PER_BLOCK;
        const int part = (int)(tid % PER_BLOCK);
        if (blk < blocks) xs_own<HALVES>(src, blk, part / (2 / HALVES), (part % (2 / HALVES)) * HALVES, bpr, dst, ld, lut);
    }
}
