// fp16deq_wide.cu: the built-in fp16deq kernels (kernels_src/fp16deq/fp16deq.cu, included as it is) with the
// wide candidates' parts that "new" never runs, so that this experiment's variants compile every candidate
// from one source: the prmt kvalue lookup of fp16deq_wide_iq4_xs (LUT kLutPrmt: fp16deq.cu's "Wide
// 16-byte-store kernels" comment has its arithmetic) and fp16deq_wide_q8_0, OUT outputs a thread for Q8_0.
//
// ARITHMETIC CONTRACT: fp16deq.cu's. Each value is the same exact fp32 product rounded once to fp16: the prmt
// lookup's k = (2^23 + u) - (2^23 + 128) is kvalues_iq4nl[code] exactly (integers below 2^24), and
// fp16deq_wide_q8_0 forms d * q as fp16deq_vec16_q8_0 does. Parity checks each candidate bitwise against old.
#include "fp16deq/fp16deq.cu"

namespace fp16deq {

// kKvBiased, kMagic and kMagicBias, the prmt table's words and constants, are fp16deq.cu's.

// Four qs bytes -> the biased kvalue bytes of their four low nibbles (lows) and four high nibbles (highs).
// prmt reads the low 3 bits of each selector nibble; bit 3 of the code picks the upper table.
__device__ __forceinline__ void kv_bytes(unsigned w, unsigned& lows, unsigned& highs) {
    const unsigned pick = 0x32103210u | ((w & 0x88888888u) >> 1);
    unsigned mixed[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const unsigned sel = w >> (16 * i);
        const unsigned lo = __byte_perm(kKvBiased[0], kKvBiased[1], sel);
        const unsigned hi = __byte_perm(kKvBiased[2], kKvBiased[3], sel);
        mixed[i] = __byte_perm(lo, hi, pick >> (16 * i));  // byte j: code of nibble j of w's half i
    }
    lows = __byte_perm(mixed[0], mixed[1], 0x6420);
    highs = __byte_perm(mixed[0], mixed[1], 0x7531);
}

__device__ __forceinline__ float kv_of_byte(unsigned bytes, int j) {
    return __uint_as_float(__byte_perm(bytes, kMagic, 0x7540u + (unsigned)j)) - kMagicBias;  // exact
}

// Eight biased kvalue bytes (codes 0-3 in b0, 4-7 in b1) -> eight fp16 outputs scale * k, in order.
__device__ __forceinline__ uint4 pack8_bytes(float scale, unsigned b0, unsigned b1) {
    uint4 out;
    unsigned* words = &out.x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned b = i < 2 ? b0 : b1;
        const int j = 2 * (i & 1);
        words[i] = pack_halves(__fmul_rn(scale, kv_of_byte(b, j)), __fmul_rn(scale, kv_of_byte(b, j + 1)));
    }
    return out;
}

template <> struct XsLut<kLutPrmt> {
    __device__ __forceinline__ uint4 octet(float scale, uint2 q, int shift) const {
        unsigned lo0, hi0, lo1, hi1;
        kv_bytes(q.x, lo0, hi0);
        kv_bytes(q.y, lo1, hi1);
        return shift ? pack8_bytes(scale, hi0, hi1) : pack8_bytes(scale, lo0, lo1);
    }
    __device__ __forceinline__ void both(float scale, uint2 q, uint4& lo, uint4& hi) const {
        unsigned lo0, hi0, lo1, hi1;
        kv_bytes(q.x, lo0, hi0);
        kv_bytes(q.y, lo1, hi1);
        lo = pack8_bytes(scale, lo0, lo1);
        hi = pack8_bytes(scale, hi0, hi1);
    }
};

template <> struct XsLutInit<kLutPrmt> {
    __device__ __forceinline__ static XsLut<kLutPrmt> make(float*) { return XsLut<kLutPrmt>{}; }
};

}  // namespace fp16deq

// Q8_0: thread t converts OUT / 8 consecutive octets of one 32-value block (d read once), 16-bit code loads
// (34-byte blocks are only 2-byte aligned) and OUT / 8 16-byte stores.
template <int OUT>
__global__ void __launch_bounds__(fp16deq::kThreads)
fp16deq_wide_q8_0(const uint8_t* __restrict__ src, int nrows, int ncols, __half* __restrict__ dst, long long ld) {
    using namespace fp16deq;
    static_assert(OUT == 8 || OUT == 16 || OUT == 32, "OUT: 8, 16 or 32 outputs per thread");
    constexpr int K = OUT / 8, PER_BLOCK = 32 / OUT;
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int groups = ncols / 32;
    const long long blk = tid / PER_BLOCK;
    if (blk >= (long long)nrows * groups) return;
    const long long row = blk / groups;
    const int first = (int)(tid % PER_BLOCK) * K;  // first octet within the block
    const uint8_t* b = src + (size_t)blk * kQ8Bytes;
    const uint16_t* q16 = reinterpret_cast<const uint16_t*>(b + 2 + 8 * first);
    unsigned pairs[4 * K];
#pragma unroll
    for (int i = 0; i < 4 * K; ++i) pairs[i] = q16[i];
    const float d = __half2float(*reinterpret_cast<const __half*>(b));
    __half* out = dst + row * ld + 32LL * (blk - row * groups) + 8 * first;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        uint4 o;
        unsigned* words = &o.x;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const unsigned pair = pairs[4 * k + i];
            words[i] = pack_halves(q8_0_exact(d, (int)(int8_t)(pair & 0xffu)), q8_0_exact(d, (int)(int8_t)(pair >> 8)));
        }
        *reinterpret_cast<uint4*>(out + 8 * k) = o;
    }
}
