// mma_frag_pair.cuh: a lane-pair fragment decoder of iq1_s for mmvq_mma (experiments/mmvq_lanepair).
//
// mmvq_mma's lane 4g + t supplies Chunk words t and 4 + t of rows g and g + 8 (mma_frag.cuh). For iq1_s,
// word 2G + h is half h of the 8-value group G, so lane t needs half t & 1 of groups t / 2 and 2 + t / 2:
// lanes t and t ^ 1 need the same two groups, and a per-lane decode (experiments/mmvq_mma's MmaFrag) does
// each group's index, table lookup and sign work twice. Here each lane of the pair does one group's work,
// the pair swaps the results with one shuffle per row, and each lane picks its halves:
//   - lane t owns group G(t) = t / 2 + 2 (t & 1): lane t & 1 == 0 the group of its word t, lane t & 1 == 1
//     the group of its word 4 + t; its selector sel(G) = nib(index(G)) | (neg ? 0x44444444 : 0), exactly
//     iq1_group's (the same byte of qs, the same 3 bits of qh, the same table word);
//   - one __shfl_xor_sync(.., 1) gives it the partner's selector, sel(G(t ^ 1)): the other group it needs;
//   - word t is prmt(k0, k1, s) with s's low 16 bits = sel(t / 2)'s half t & 1 (iq1_group's `sel >> 16 h`:
//     the default-mode prmt reads only the selector's low 16 bits, as iq1_group's own `lo` already relies
//     on), word 4 + t likewise from sel(2 + t / 2). A lane-constant prmt of (own, partner) makes those two
//     selectors without a branch or a select.
// So Frag.lo, Frag.hi, dw and ls are decode()'s w[t], w[4 + t], dw and ls0 from the same bytes, as every
// MmaFrag must give (mma_frag.cuh's contract), and the kernel around it is mmvq_mma.cu's, unchanged: the
// chunk integers, the chains and the tree, hence the bits, are old's. tests/ checks the exchange on the CPU.
//
// The formats are tags: fmt_iq1_s under other names (every trait inherited), so that mmvq_mma<F, ...>
// compiles with this decoder: fmt_iq1_s_pair (the shuffle) and fmt_iq1_s_lane, the control, in which each
// lane computes its partner's selector itself (the same code without the shuffle, two groups' work a row).
// Host-compilable (tests/iq_host): there the exchange computes the partner's selector from the same block,
// which is what the partner lane (same row, same chunk) holds; LANEPAIR_XOR names the partner in both.
#pragma once
#include "mmvq/mma_frag.cuh"  // Frag, MmaFrag, fmt_iq1_s, prmt, ld_u8, ld_u16, ld_half

#ifndef LANEPAIR_XOR
#define LANEPAIR_XOR 1  // the partner lane: t ^ 1 (tests/ build 2 and 3 to see the check fail)
#endif

namespace siq {

struct fmt_iq1_s_pair : fmt_iq1_s {};
struct fmt_iq1_s_lane : fmt_iq1_s {};

template <bool PAIR>
struct Iq1sPairFrag {
    using L = fmt_iq1_s::L;
    // Lane t's group: t / 2 for an even t (its word t), 2 + t / 2 for an odd t (its word 4 + t).
    static __host__ __device__ __forceinline__ int group(int t) { return t / 2 + 2 * (t & 1); }
    // iq1_group's selector of group G of chunk j of block b (qh: the chunk's u16).
    static __device__ __forceinline__ uint32_t sel(const uint8_t* b, int j, int G, uint32_t qh, const Tab& tab) {
        const uint32_t index = ld_u8(b + L::QS + 4 * j + G) | (((qh >> (3 * G)) & 7u) << 8);
        // iq1_group's `neg ? nib | 0x44444444 : nib`: prmt's sign replication copies qh's bit 15 (the top of
        // its byte 1) into every byte, a mask of the delta's sign (one PRMT where the select takes three).
        return tab.words[index] | (prmt(qh, 0u, 0x9999u) & 0x44444444u);
    }
    // The partner's selector: its lane's sel() of the same row and chunk.
    static __device__ __forceinline__ uint32_t partner(uint32_t own, const uint8_t* b, int j, int t, uint32_t qh,
                                                       const Tab& tab) {
#ifdef __CUDA_ARCH__
        if constexpr (PAIR) return __shfl_xor_sync(0xFFFFFFFFu, own, LANEPAIR_XOR);
#endif
        (void)own;
        return sel(b, j, group(t ^ LANEPAIR_XOR), qh, tab);
    }
    static __device__ __forceinline__ Frag load(const uint8_t* b, int j, int t, const uint32_t (&)[4], const Tab& tab) {
        Frag f;
        const uint32_t qh = ld_u16(b + L::QH + 2 * j);
        f.dw = ld_half(b) * 0.125f;
        f.ls = 2 * (int)((qh >> 12) & 7u) + 1;
        const uint32_t own = sel(b, j, group(t), qh, tab);
        const uint32_t other = partner(own, b, j, t, qh, tab);
        // Even t: own is group t / 2 (word t: its low half), other 2 + t / 2 (word 4 + t: low half).
        // Odd t: other is group t / 2 (word t: its high half, bytes 6-7), own 2 + t / 2 (high half, bytes 2-3).
        const bool odd = (t & 1) != 0;
        f.lo = (int)prmt(tab.k0, tab.k1, prmt(own, other, odd ? 0x7676u : 0x1010u));
        f.hi = (int)prmt(tab.k0, tab.k1, prmt(own, other, odd ? 0x3232u : 0x5454u));
        return f;
    }
};

template <>
struct MmaFrag<fmt_iq1_s_pair> : Iq1sPairFrag<true> {};
template <>
struct MmaFrag<fmt_iq1_s_lane> : Iq1sPairFrag<false> {};

}  // namespace siq
