// mma_frag_iq2xxs.cuh: iq2_xxs's lane-pair fragment decoder for mmvq_mma, a candidate of issue 37 (the pair
// extended from iq1_s, the product's since issue 37, to the next grid format with one scale per 32 values).
//
// iq2_xxs's 8-value group G gives Chunk words 2G and 2G + 1 as the two halves of one selector, iq2_group's
// prmt(k0, k1, sel >> 16 h) with sel = nib | ksign_nibbles(7-bit sign index) (fmt_iq2_xxs::decode), so the
// product's GridPairFrag (kernels_src/mmvq/mma_frag.cuh) applies as it is: PairSel<fmt_iq2_xxs> gives group
// G's selector from the same bytes, the grid byte G of the chunk's index word (one LDS.U8 a lane) and the sign
// index in the chunk's aux word, as iq2_sel<false> (decoders.cuh: nib | ksign_nibbles(t & 0x7F), the lean
// decoder's form, which its tests hold to decode()'s). dw and ls are decode()'s (d * 0.125f, 2 (aux >> 28) + 1).
// So lo, hi, dw, ls are decode()'s w[t], w[4 + t], dw, ls0 (mma_frag.cuh's contract); tests/ checks every lane.
// Tags: fmt_iq2_xxs_pair (the shuffle) and fmt_iq2_xxs_lane (the control: the partner's selector computed by
// the lane itself).
#pragma once
#include "common/decoders.cuh"  // iq2_sel
#include "mmvq/mma_frag.cuh"      // Frag, MmaFrag, GridPairFrag, PairSel, fmt_iq2_xxs

namespace siq {

template <>
struct PairSel<fmt_iq2_xxs> {
    using L = fmt_iq2_xxs::L;
    static __device__ __forceinline__ uint32_t head(const uint8_t* b, int j, Frag& f) {
        const uint32_t aux = ld_u32_a2(b + L::QS + 8 * j + 4);  // four 7-bit sign indexes, the scale in 28-31
        f.dw = ld_half(b) * 0.125f;
        f.ls = 2 * (int)(aux >> 28) + 1;
        return aux;
    }
    static __device__ __forceinline__ uint32_t sel(const uint8_t* b, int j, int G, uint32_t aux, const Tab& tab) {
        return iq2_sel<false>(aux >> (7 * G), tab.words[ld_u8(b + L::QS + 8 * j + G)]);
    }
};

struct fmt_iq2_xxs_pair : fmt_iq2_xxs {};
struct fmt_iq2_xxs_lane : fmt_iq2_xxs {};

template <>
struct MmaFrag<fmt_iq2_xxs_pair> : GridPairFrag<fmt_iq2_xxs, true> {};
template <>
struct MmaFrag<fmt_iq2_xxs_lane> : GridPairFrag<fmt_iq2_xxs, false> {};

}  // namespace siq
