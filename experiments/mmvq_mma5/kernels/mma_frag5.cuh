// mma_frag5.cuh: mmvq_mma's fragment decoders for the other five 1-3-bit formats (issue 37 item 1), an
// experiment (experiments/mmvq_mma5): iq3_xxs and iq3_s (one scale per 32 values: the built-in schedule as it
// is, MmaFrag<fmt_iq3_*>, per lane), and iq1_m, iq2_xs and iq2_s (a scale per 16 values: two m16n8k16 mmas a
// chunk, one per scale, through the tags fmt_<format>_k16 (per lane) and fmt_<format>_k16pair (the lane pair,
// kernels_src/mmvq/mma_frag.cuh's GridPairFrag)).
//
// ARITHMETIC CONTRACT: mmvq_mma.cu's and mma_frag.cuh's, with this for the split tags:
//   - the fragment: MmaFrag<tag>::load(b, j, t, kv, tab) gives decode(b, j)'s w[t], w[4 + t], dw and ls0 from
//     the same bytes, and MmaFrag<tag>::ls1(b, j) its ls1 (tests/iq_host/mma_emul.h checks every lane's against
//     the full decode);
//   - the integer: Chunk words 0-3 are values 0-15 (ls0's), words 4-7 values 16-31 (ls1's). One m16n8k16 s8
//     mma over A = {word t of rows g, g + 8} and B = {q8_1 word t of column g} is the exact int32 C0 of the
//     first 16 values (PTX ISA, m16n8k16 .s8: a0 = row g, k 4t..4t+3; a1 = row g + 8; b0 = k 4t..4t+3 of
//     column g; C as m16n8k32's), one over words 4 + t is C1 of the last 16: chunk_isum's two dp4a chains'
//     integers s0, s1 (integer sums: any order gives them);
//   - the float: isum = ls0 * C0 + ls1 * C1 in int32 is chunk_isum's two-scale integer (exact: |isum| < 2^24),
//     and SplitFrag::isum_float gives its float: (float)isum, chunk_fma's own conversion, or for iq1_m, whose
//     |isum| <= 32 * 9 * 127 * 15 = 548640 < 2^22 (ScaleHi::MAX_ISUM), the bits of 1.5 * 2^23 + isum less
//     1.5 * 2^23 (chunk_isum_f's trick: the sum stays in the binade where floats are the integers), the same
//     float without the quarter-rate I2F. Either way the fmaf into acc has old's inputs. (Not the one-scale
//     kernels' fmaf(C', ls, -1.5 * 2^23 ls) per half: the two halves' floats and their sum take 5 more
//     instructions a row than the integer multiply-adds; iq2_*'s |isum| reaches 32 * 43 * 127 * 31 > 2^22, as
//     the all-43 grid entries of iq2_xs and iq2_s allow, so they convert.)
// The tags declare ONE_SCALE (mmvq_mma's static_assert: each mma's C takes one scale); their decode() is the
// format's (two scales), and only mma_chunk (specialized below, after mmvq_mma.cu) reads them.
// Host-compilable, like mma_frag.cuh.
#pragma once
#include "mmvq/mma_frag.cuh"  // Frag, MmaFrag, GridPairFrag, PairSel, iq2_sel ...

namespace siq {

// ---- iq3_xxs and iq3_s: 4-value grid words, per lane --------------------------------------------------
// Word i (i = 2G + h) of a chunk is the table word of its own index byte i, with half h of group G's sign
// byte applied: lane t's words t and 4 + t are two lookups whatever the lanes share, and lanes t, t ^ 1 share
// only the sign byte's extraction (a pair would trade that for a shuffle: not built, PERF_NOTES v14).
// half_mask(s8, h) is decode()'s sign_mask_lo(s8) for h = 0 and sign_mask_hi(s8) for h = 1, the same expression
// with the lane's mask and multiplier (0x0F, 0x10204080 or 0xF0, 0x01020408: loop constants), one code for
// every lane.
__device__ __forceinline__ uint32_t half_mask(uint32_t s8, int h) {
    return prmt((s8 & (0x0Fu << (4 * h))) * (0x10204080u >> (4 * h)), 0u, 0xBA98u);
}

#ifndef MMA5_DEFECT_SIGN_HALF
#define MMA5_DEFECT_SIGN_HALF 0  // tests plant 1: every lane takes its sign nibble of the wrong half
#endif

// iq3_xxs, chunk j: index bytes at QS + 8j (byte i: word i), aux at SCALES_SIGNS + 4j (four 7-bit sign
// indexes, the scale in bits 28-31); dw = d / 4.
template <>
struct MmaFrag<fmt_iq3_xxs> {
    using L = fmt_iq3_xxs::L;
    static __device__ __forceinline__ int word(const uint8_t* b, int j, int i, uint32_t aux, const Tab& tab) {
        const uint32_t s8 = ksigns8((aux >> (7 * (i / 2))) & 0x7Fu);
        return apply_signs(tab.words[ld_u8(b + L::QS + 8 * j + i)], half_mask(s8, (i & 1) ^ MMA5_DEFECT_SIGN_HALF));
    }
    static __device__ __forceinline__ Frag load(const uint8_t* b, int j, int t, const uint32_t (&)[4], const Tab& tab) {
        Frag f;
        const uint32_t aux = ld_u32_a2(b + L::SCALES_SIGNS + 4 * j);
        f.dw = ld_half(b) * 0.25f;
        f.ls = 2 * (int)(aux >> 28) + 1;
        f.lo = word(b, j, t, aux, tab);
        f.hi = word(b, j, 4 + t, aux, tab);
        return f;
    }
};

// iq3_s, chunk j: index byte i at QS + 8j + i with its 9th bit in bit i of the QH byte j, sign byte G at
// SIGNS + 4j + G, the scale nibble j & 1 of SCALES byte j / 2; dw = d.
template <>
struct MmaFrag<fmt_iq3_s> {
    using L = fmt_iq3_s::L;
    static __device__ __forceinline__ int word(const uint8_t* b, int j, int i, uint32_t qh, const Tab& tab) {
        const uint32_t index = ld_u8(b + L::QS + 8 * j + i) | (((qh >> i) & 1u) << 8);
        const uint32_t s8 = ld_u8(b + L::SIGNS + 4 * j + i / 2);
        return apply_signs(tab.words[index], half_mask(s8, (i & 1) ^ MMA5_DEFECT_SIGN_HALF));
    }
    static __device__ __forceinline__ Frag load(const uint8_t* b, int j, int t, const uint32_t (&)[4], const Tab& tab) {
        Frag f;
        const uint32_t qh = ld_u8(b + L::QH + j);
        f.dw = ld_half(b);
        f.ls = 2 * (int)((ld_u8(b + L::SCALES + j / 2) >> (4 * (j & 1))) & 0x0Fu) + 1;
        f.lo = word(b, j, t, qh, tab);
        f.hi = word(b, j, 4 + t, qh, tab);
        return f;
    }
};

// ---- iq1_m, iq2_xs, iq2_s: 8-value grid groups (GridPairFrag's form), a scale per 16 values -------------
// PairSel<F> as mma_frag.cuh's: head(b, j, f) sets dw and ls (= ls0) and returns the chunk's context word;
// sel(b, j, G, ctx, tab) is group G's selector, the one the format's group decode (iq1_group / iq2_group)
// looks its two words up with. ScaleHi<F>::ls1(b, j) is decode()'s ls1.
template <class F>
struct ScaleHi;

#ifndef MMA5_DEFECT_LS1
#define MMA5_DEFECT_LS1 0  // tests plant 1: ls1 read from the low nibble (ls0's), as a one-scale decode would
#endif

// iq2_xs and iq2_s: dw = d / 8; the scale byte at SCALES + j holds ls0's nibble (low) and ls1's (high).
template <class F>
struct Iq2Scales {
    static constexpr int MAX_ISUM = 32 * 43 * 127 * 31;  // |w| <= 43, |q| <= 127, ls <= 31
    static __device__ __forceinline__ void head(const uint8_t* b, int j, Frag& f) {
        f.dw = ld_half(b) * 0.125f;
        f.ls = 2 * (int)(ld_u8(b + F::L::SCALES + j) & 0x0Fu) + 1;
    }
    static __device__ __forceinline__ int ls1(const uint8_t* b, int j) {
        const uint32_t sc = ld_u8(b + F::L::SCALES + j);
        return 2 * (int)((MMA5_DEFECT_LS1 ? sc : sc >> 4) & 0x0Fu) + 1;
    }
};
template <>
struct ScaleHi<fmt_iq2_xs> : Iq2Scales<fmt_iq2_xs> {};
template <>
struct ScaleHi<fmt_iq2_s> : Iq2Scales<fmt_iq2_s> {};

// iq2_xs: group G is the u16 at QS + 8j + 2G (9-bit grid index, 7-bit sign index: exactly 7 bits after the
// shift, so iq2_sel<true> needs no mask before its popc). No context: each group's u16 holds all it needs.
template <>
struct PairSel<fmt_iq2_xs> {
    using L = fmt_iq2_xs::L;
    static __device__ __forceinline__ uint32_t head(const uint8_t* b, int j, Frag& f) {
        Iq2Scales<fmt_iq2_xs>::head(b, j, f);
        return 0u;
    }
    static __device__ __forceinline__ uint32_t sel(const uint8_t* b, int j, int G, uint32_t, const Tab& tab) {
        const uint32_t v = ld_u16(b + L::QS + 8 * j + 2 * G);
        return iq2_sel<true>(v >> 9, tab.words[v & 0x1FFu]);
    }
};

// iq2_s: group G's low index byte at QS + 4j + G, its 2 high bits at bits 2G of the QH byte j, its sign byte
// G of the word at SIGNS + 4j (the context; sign_nibbles: iq2_s's signs are plain bits, not a 7-bit index).
// Read as one word where a byte a group would do: with bytes (and qh as the context) NVRTC 13.0, the H100's,
// spills 52 bytes at TG = 4 (13.5 does not), for 6 fewer instructions a chunk.
template <>
struct PairSel<fmt_iq2_s> {
    using L = fmt_iq2_s::L;
    static __device__ __forceinline__ uint32_t head(const uint8_t* b, int j, Frag& f) {
        Iq2Scales<fmt_iq2_s>::head(b, j, f);
        return ld_u32_a2(b + L::SIGNS + 4 * j);
    }
    static __device__ __forceinline__ uint32_t sel(const uint8_t* b, int j, int G, uint32_t sg, const Tab& tab) {
        const uint32_t qh = ld_u8(b + L::QH + j);
        const uint32_t index = ld_u8(b + L::QS + 4 * j + G) | ((qh << (8 - 2 * G)) & 0x300u);
        return tab.words[index] | sign_nibbles((sg >> (8 * G)) & 0xFFu);
    }
};

// iq1_m: the u16 at QH + 2j is the context (a nibble a group: 3 high index bits, the delta's sign in bit 3);
// the 8 scale bytes at SCALES hold 16 3-bit scales and d's nibbles (read as decode() reads them: the block
// is 8-aligned in the buffer, 56 = 8 x 7 and the head is 0 or 8).
template <>
struct PairSel<fmt_iq1_m> {
    using L = fmt_iq1_m::L;
    // Scales 2j and 2j + 1: (sw >> shift) and (sw >> shift + 3), as decode() selects them.
    static __device__ __forceinline__ uint32_t scale_bits(uint2 sc, int j) {
        return ((j < 4 ? sc.x : sc.y) >> (16 * ((j / 2) & 1))) >> (6 * (j & 1));
    }
    static __device__ __forceinline__ uint32_t head(const uint8_t* b, int j, Frag& f) {
        const uint2 sc = ld_u64_any(b + L::SCALES);
        f.dw = fmt_iq1_m::block_d(sc) * 0.125f;
        f.ls = 2 * (int)(scale_bits(sc, j) & 7u) + 1;
        return ld_u16(b + L::QH + 2 * j);
    }
    // iq1_group's `neg ? nib | 0x44444444 : nib`: 0 - (bit 3 of the nibble) is all ones exactly when it is set.
    static __device__ __forceinline__ uint32_t sel(const uint8_t* b, int j, int G, uint32_t qh, const Tab& tab) {
        const uint32_t h = (qh >> (4 * G)) & 0xFu;
        const uint32_t index = ld_u8(b + L::QS + 4 * j + G) | ((h & 7u) << 8);
        return tab.words[index] | ((0u - (h >> 3)) & 0x44444444u);
    }
};
template <>
struct ScaleHi<fmt_iq1_m> {
    static constexpr int MAX_ISUM = 32 * 9 * 127 * 15;  // |w| = |8g +- 1| <= 9, |q| <= 127, ls <= 15
    static __device__ __forceinline__ int ls1(const uint8_t* b, int j) {
        const uint32_t s = PairSel<fmt_iq1_m>::scale_bits(ld_u64_any(b + fmt_iq1_m::L::SCALES), j);
        return 2 * (int)((MMA5_DEFECT_LS1 ? s : s >> 3) & 7u) + 1;
    }
};

// The split tags: the format under another name (every trait inherited) that mmvq_mma runs with two k16 mmas.
template <class F, bool PAIR>
struct SplitFrag : GridPairFrag<F, PAIR>, ScaleHi<F> {
    // The float of isum = ls0 * c0 + ls1 * c1 (the header's contract: the magic form where |isum| < 2^22).
    static __device__ __forceinline__ float isum_float(int c0, int c1, int ls0, int ls1) {
        if constexpr (ScaleHi<F>::MAX_ISUM < (1 << 22)) {
            return __int_as_float(MMA_MAGIC + c0 * ls0 + c1 * ls1) - MMA_BIAS;
        } else {
            return (float)(c0 * ls0 + c1 * ls1);
        }
    }
};

#define MMA5_SPLIT_TAGS(X) X(iq1_m) X(iq2_xs) X(iq2_s)
#define MMA5_TAG(name)                                                                                   \
    struct fmt_##name##_k16 : fmt_##name {                                                                 \
        static constexpr bool ONE_SCALE = true, MMA_K16 = true; /* one scale an mma: the header says why */ \
    };                                                                                                     \
    struct fmt_##name##_k16pair : fmt_##name##_k16 {};                                                     \
    template <>                                                                                            \
    struct MmaFrag<fmt_##name##_k16> : SplitFrag<fmt_##name, false> {};                                    \
    template <>                                                                                            \
    struct MmaFrag<fmt_##name##_k16pair> : SplitFrag<fmt_##name, true> {};
MMA5_SPLIT_TAGS(MMA5_TAG)
#undef MMA5_TAG

// One m16n8k16 s8 mma, D = A B + C, C = `init` in every element (A: rows g, g + 8 at k 4t..4t+3; B: k 4t..4t+3
// of column g).
__device__ __forceinline__ void mma_s8_k16(const int (&a)[2], int b, int init, int (&d)[4]) {
#ifdef STRATA_MMA_DEVICE
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b), "r"(init));
#elif defined(__CUDA_ARCH__)
    __trap();
#endif
}

}  // namespace siq
