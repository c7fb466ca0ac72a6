// onecol3_dec.cuh: iq3_xxs's one-column decoder with mul7's sign decode (experiments/mmvq_onecol3; the kernel is
// the product's mmvq_onecol<D, R, MINB, U>, kernels_src/mmvq/mmvq_onecol.cu, included as it is by mmvq_onecol3.cu).
// Host-compilable: the host test (tests/onecol3_host.cpp) runs the same code on the CPU.
//
// ARITHMETIC CONTRACT: kernels_src/mmvq/onecol_dec.cuh's (read it first). For chunk j of a block and the q8_1 codes
// q of its activation block, isum = ls * sum_i w_i q_i with old's ls = 2 s + 1 and old's signed weight bytes w_i
// (the grid byte, negated where the sign bit is set), summed by dp4a (exact integers, any order), and the chunk's
// scale the float d of the block (the 1/4 of dw = d / 4 is in the staged activation scale: exact, a power of two).
//
// The sign decode (onecol::Iq2xxsMul7::signs, iq2_xxs's mul7, reused): one multiply of the 7-bit sign index puts the
// sign of weight PI[p] (Mul7Order: 0, 4, 1, 5, 2, 6, 3) at bit 4p, the parity (the 8th sign) at bit 28. So nibble p of
// a PRMT selector can carry weight PI[p]'s sign in its bit 0, if the 8 source bytes hold each magnitude beside its
// negation. The restaged grid does that: entry i is two words, lo = (+g0, -g0, +g1, -g1) and hi = (+g2, -g2, +g3,
// -g3) of grid word i. A group's two grid indexes a (values 0-3) and b (values 4-7) give the entries A and B, and
//   PRMT(A.lo, B.lo, sel)       bytes: +-g_a0 (source 0/1), +-g_b0 (4/5), +-g_a1 (2/3), +-g_b1 (6/7) = weights 0, 4, 1, 5
//   PRMT(A.hi, B.hi, sel >> 16) bytes: weights 2, 6, 3, 7 from the same source bytes,
// with sel = (0x62406240 | (signs & 0x11111111)): the index part of every nibble is constant, the sign is bit 0.
// The activation codes are staged in the same order (ActPairs<Iq3xxsMul7>: Mul7Order), so each dp4a pairs a weight
// with its own code: the same 32 products as old's. Against the sign-mask decoder new runs (ksign_mask_lo/hi, a
// masked dp4a and a LOP3 a word): no masks, no second dp4a chain; the grid lookups are one LDS.64 per index where
// new has one LDS.32 (the same count, twice the bytes).
#pragma once
// the product's one-column decoders: Mul7Order, Iq2xxsMul7::signs, two_words_at, word_shift, ActPairs, LaneConst
#include "mmvq/onecol_dec.cuh"

namespace onecol {

// A planted-defect build of the host test overrides this (tests/test_mmvq_onecol3.py); the kernels never do.
#ifndef ONECOL3_SEL_BASE
#define ONECOL3_SEL_BASE 0x62406240u  // each nibble's source byte for a positive weight (weights PI[p])
#endif

// One chunk's fields: grid indexes 0-3 and 4-7, the four sign indexes with the scale, the fp16 d.
struct Iq3xxsRaw {
    uint32_t i0, i1, aux, d16;
};

// A row's field pointers for the lane's chunk: the aligned words around its 8 index bytes and its 4 scale bytes
// (both at the same 2-byte phase: 2 + 8 j and 66 + 4 j), and its block's d.
struct Iq3xxsPtr {
    const uint32_t* qs;
    const uint32_t* ss;
    const uint16_t* d;
    static constexpr int STEP = LaneWalk<fmt_iq3_xxs>::STEP;
    static_assert(STEP % 4 == 0, "a lane's next block must keep its word phase");
    Iq3xxsPtr() = default;
    __device__ __forceinline__ static const uint32_t* aligned(const uint8_t* p) {
        return reinterpret_cast<const uint32_t*>(reinterpret_cast<unsigned long long>(p) & ~3ull);
    }
    __device__ __forceinline__ Iq3xxsPtr(const uint8_t* block, int j)
        : qs(aligned(block + layout::iq3_xxs::QS + 8 * j)), ss(aligned(block + layout::iq3_xxs::SCALES_SIGNS + 4 * j)),
          d(reinterpret_cast<const uint16_t*>(block)) {}
    __device__ __forceinline__ void advance() {
        qs += STEP / 4;
        ss += STEP / 4;
        d += STEP / 2;
    }
    __device__ __forceinline__ Iq3xxsRaw load(uint32_t shift) const {
        Iq3xxsRaw r;
        two_words_at(qs, shift, r.i0, r.i1);
        r.aux = __funnelshift_r(__ldg(ss), __ldg(ss + 1), shift);
        r.d16 = (uint32_t)__ldg(d);
        return r;
    }
};

// The restaged grid's entry: a word's magnitudes each beside its negation (exact: every magnitude is below 128).
__host__ __device__ __forceinline__ constexpr uint32_t mul7_pair_word(uint32_t g, int half) {
    const uint32_t m0 = g >> (16 * half) & 0xFFu, m1 = g >> (16 * half + 8) & 0xFFu;
    return m0 | ((0u - m0) & 0xFFu) << 8 | m1 << 16 | ((0u - m1) & 0xFFu) << 24;
}

// N: the entries' interleaved copies (copy c of entry i at i * N + c, 8 bytes each), lane l reading copy l % N.
template <int N>
struct Iq3xxsMul7 {
    static_assert(N == 1 || N == 2 || N == 4 || N == 8 || N == 16, "copies: a power of two up to 16");
    using F = fmt_iq3_xxs;
    using Ptr = Iq3xxsPtr;
    using Raw = Iq3xxsRaw;
    using Order = Mul7Order;
    static constexpr float D_ACT_SCALE = 0.25f;  // dw = d / 4
    static constexpr bool CODE_SUM = false;
    static constexpr int GRID_WORDS = 2 * F::TABLE_WORDS * N;
    static constexpr int SHARED_WORDS = GRID_WORDS;
    static constexpr uint32_t SHIFT = 3 + (N >= 2) + (N >= 4) + (N >= 8) + (N >= 16);  // log2(8 N): an entry's bytes

    __device__ __forceinline__ static void stage(uint32_t* sh, int tid, int nthreads) {
        for (int i = tid; i < GRID_WORDS; i += nthreads) sh[i] = mul7_pair_word(F::table()[i / (2 * N)], i & 1);
    }
    __device__ __forceinline__ static uint32_t shift(const uint8_t* first_block, int j) {
        return word_shift(first_block + layout::iq3_xxs::QS + 8 * j);
    }
    __device__ __forceinline__ static LaneConst lane_const(const uint32_t*, int lane) {
        return LaneConst{(uint32_t)(lane % N) * 8u, 0u, 0u};
    }
    __device__ __forceinline__ static float d(const Raw& r) { return fp16_bits_to_float((uint16_t)r.d16); }

    // Entry of index byte K of w (the lane's copy): an 8-byte load at (byte << SHIFT) | the copy's offset.
    template <int K>
    __device__ __forceinline__ static uint2 entry(const uint32_t* sh, uint32_t w, uint32_t lane_bytes) {
        constexpr int AT = 8 * K;
        const uint32_t scaled = AT >= (int)SHIFT ? w >> (AT - SHIFT) : w << (SHIFT - AT);
        return *reinterpret_cast<const uint2*>(reinterpret_cast<const uint8_t*>(sh) +
                                               or_and(lane_bytes, scaled, 0xFFu << SHIFT));
    }
    template <int G>
    __device__ __forceinline__ static int group(const uint32_t* sh, const Raw& r, const LaneConst& lc,
                                                const int q[8], int s) {
        const uint32_t w = G < 2 ? r.i0 : r.i1;
        const uint2 a = entry<2 * (G & 1)>(sh, w, lc.bytes), b = entry<2 * (G & 1) + 1>(sh, w, lc.bytes);
        const uint32_t sel = or_and(ONECOL3_SEL_BASE, Iq2xxsMul7::signs((r.aux >> (7 * G)) & 0x7Fu), 0x11111111u);
        s = __dp4a((int)prmt(a.x, b.x, sel), q[2 * G], s);
        return __dp4a((int)prmt(a.y, b.y, sel >> 16), q[2 * G + 1], s);
    }
    // ls * sum w q, ls = 2 * (aux >> 28) + 1 (bit 27, the last sign index's top bit, is overwritten by the 1).
    __device__ __forceinline__ static int isum(const uint32_t* sh, const Raw& r, const LaneConst& lc, const int q[8],
                                               int /*code_sum2*/) {
        int s = group<0>(sh, r, lc, q, 0);
        s = group<1>(sh, r, lc, q, s);
        s = group<2>(sh, r, lc, q, s);
        s = group<3>(sh, r, lc, q, s);
        return (int)((r.aux >> 27) | 1u) * s;
    }
};

}  // namespace onecol
