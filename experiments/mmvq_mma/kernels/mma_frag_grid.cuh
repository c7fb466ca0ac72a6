// mma_frag_grid.cuh: mmvq_mma's fragment decoders for the super-block grid formats iq2_xxs and iq1_s, an
// experiment (experiments/mmvq_mma): measured slower than mmvq_new at 8 columns (docs/PERF_NOTES.md, "Second
// round", h-frag), so `new` never runs them and kernels_src holds only the formats it runs (mma_frag.cuh).
//
// ARITHMETIC CONTRACT: mma_frag.cuh's. MmaFrag<F>::load(b, j, t, kv, tab) gives exactly decode(b, j)'s
// w[t], w[4 + t], dw and ls0 from the same bytes (the same lookups, the same fp16 conversion);
// tests/iq_host/mma_emul.h checks every lane's words against the full decode (this experiment's tests build
// it with this header: experiments/mmvq_mma/tests). Host-compilable, like mma_frag.cuh.
#pragma once
#include "mmvq/mma_frag.cuh"  // Frag, MmaFrag, MmaGroup, ld_u32_a2 ...

namespace siq {

// The super-block grid formats give words 2G + h (h = 0, 1) of an 8-value group G: lane t's word t is
// half t & 1 of group t / 2, its word 4 + t the same half of group 2 + t / 2. grid_half is iq2_group's /
// iq1_group's prmt for that half alone (sel >> 16 h), the same bytes.
__device__ __forceinline__ int grid_half(const Tab& tab, uint32_t sel, int h) {
    return (int)prmt(tab.k0, tab.k1, sel >> (16 * h));
}

// iq2_xxs, chunk j: 8 bytes at QS + 8j, four grid index bytes then four 7-bit sign indexes with the
// scale in bits 28-31 (decode()'s words, read with ld_u32_a2: the block is only 2-aligned).
template <>
struct MmaFrag<fmt_iq2_xxs> {
    using L = fmt_iq2_xxs::L;
    static __device__ __forceinline__ int word(const Tab& tab, uint32_t idx, uint32_t aux, int grp, int h) {
        const uint32_t nib = tab.words[(idx >> (8 * grp)) & 0xFFu];
        return grid_half(tab, nib | ksign_nibbles((aux >> (7 * grp)) & 0x7Fu), h);
    }
    static __device__ __forceinline__ Frag load(const uint8_t* b, int j, int t, const uint32_t (&)[4], const Tab& tab) {
        Frag f;
        const uint32_t idx = ld_u32_a2(b + L::QS + 8 * j), aux = ld_u32_a2(b + L::QS + 8 * j + 4);
        f.dw = ld_half(b) * 0.125f;
        f.ls = 2 * (int)(aux >> 28) + 1;
        f.lo = word(tab, idx, aux, t / 2, t & 1);
        f.hi = word(tab, idx, aux, 2 + t / 2, t & 1);
        return f;
    }
};

// iq1_s, chunk j: the four low index bytes at QS + 4j, the u16 at QH + 2j (3 high index bits per group,
// the scale in bits 12-14, the delta's sign in bit 15: iq1_group's 0x44444444 selects the 8g - 1 word).
template <>
struct MmaFrag<fmt_iq1_s> {
    using L = fmt_iq1_s::L;
    static __device__ __forceinline__ int word(const Tab& tab, uint32_t qs, uint32_t qh, int grp, int h) {
        const uint32_t index = ((qs >> (8 * grp)) & 0xFFu) | (((qh >> (3 * grp)) & 7u) << 8);
        const uint32_t nib = tab.words[index];
        return grid_half(tab, (qh & 0x8000u) ? (nib | 0x44444444u) : nib, h);
    }
    static __device__ __forceinline__ Frag load(const uint8_t* b, int j, int t, const uint32_t (&)[4], const Tab& tab) {
        Frag f;
        const uint32_t qs = ld_u32_a2(b + L::QS + 4 * j), qh = ld_u16(b + L::QH + 2 * j);
        f.dw = ld_half(b) * 0.125f;
        f.ls = 2 * (int)((qh >> 12) & 7u) + 1;
        f.lo = word(tab, qs, qh, t / 2, t & 1);
        f.hi = word(tab, qs, qh, 2 + t / 2, t & 1);
        return f;
    }
};

}  // namespace siq
