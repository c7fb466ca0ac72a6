// mma_frag_split.cuh: mmvq_mma's fragment decoders for the 1-2-bit formats with a scale per 16 values (iq1_m,
// iq2_xs, iq2_s), which run two m16n8k16 mmas a chunk, one per scale, through the "split" tags
// fmt_<format>_k16pair: the format under another name whose MmaFrag is the lane pair (mma_frag.cuh's
// GridPairFrag) and whose mma_chunk is mmvq_mma.cu's mma_chunk_k16. First measured in experiments/mmvq_mma5
// (which keeps the per-lane controls, fmt_<format>_k16, and the TG = 3 launch).
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
// format's (two scales), and only mma_chunk (specialized in mmvq_mma.cu) reads them.
// Host-compilable, like mma_frag.cuh.
#pragma once
#include "mmvq/mma_frag.cuh"  // Frag, MmaFrag, GridPairFrag, PairSel, iq2_sel ...

namespace siq {

// PairSel<F> as mma_frag.cuh's: head(b, j, f) sets dw and ls (= ls0) and returns the chunk's context word;
// sel(b, j, G, ctx, tab) is group G's selector, the one the format's group decode (iq1_group / iq2_group)
// looks its two words up with. ScaleHi<F>::ls1(b, j) is decode()'s ls1.
template <class F>
struct ScaleHi;

#ifndef MMA_DEFECT_LS1
#define MMA_DEFECT_LS1 0  // tests plant 1: ls1 read from the low nibble (ls0's), as a one-scale decode would
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
        return 2 * (int)((MMA_DEFECT_LS1 ? sc : sc >> 4) & 0x0Fu) + 1;
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
        return 2 * (int)((MMA_DEFECT_LS1 ? s : s >> 3) & 7u) + 1;
    }
};

// A split tag's decoder: GridPairFrag<F, PAIR>'s words, dw and ls0 (PAIR = false, each lane computing both
// groups' selectors, is experiments/mmvq_mma5's control), ScaleHi<F>'s ls1, and the float of the chunk.
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

// Tag `tag`: format `name` under another name (every trait inherited) that mmvq_mma runs with two k16 mmas a
// chunk (mmvq_mma.cu's MMA_K16_CHUNK specializes its mma_chunk), decoded by SplitFrag<fmt_name, PAIR>.
#define MMA_SPLIT_TAG(name, tag, PAIR)                                                                     \
    struct tag : fmt_##name {                                                                              \
        static constexpr bool ONE_SCALE = true, MMA_K16 = true; /* one scale an mma: the header says why */ \
    };                                                                                                     \
    template <>                                                                                            \
    struct MmaFrag<tag> : SplitFrag<fmt_##name, PAIR> {};

// The product's split tags: the lane pair (H100, 131072 x 8192, 8 columns: iq1_m 273.6 us, iq2_xs 276.1,
// iq2_s 310.8 against mmvq_new's 318.9, 325.6, 329.6; families/mmvq_mma.py).
#define MMA_SPLIT_FORMATS(X) X(iq1_m) X(iq2_xs) X(iq2_s)
#define MMA_SPLIT_PAIR_TAG(name) MMA_SPLIT_TAG(name, fmt_##name##_k16pair, true)
MMA_SPLIT_FORMATS(MMA_SPLIT_PAIR_TAG)
#undef MMA_SPLIT_PAIR_TAG

}  // namespace siq
