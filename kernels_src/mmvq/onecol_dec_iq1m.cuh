// onecol_dec_iq1m.cuh: iq1_m's one-column decoder for mmvq_onecol<D, R, MINB, U> (mmvq_onecol.cu includes it;
// new runs Iq1mSel<false> for one-column iq1_m passes of 131072 rows or more: strata_bench/families/mmvq_onecol.py).
// First measured in experiments/mmvq_onecol1m (docs/PERF_NOTES.md v18), which keeps Iq1mSel<true> as a control.
// Host-compilable: experiments/mmvq_onecol1m/tests/onecol1m_host.cpp runs the same code on the CPU.
//
// ARITHMETIC CONTRACT: kernels_src/mmvq/onecol_dec.cuh's (read it first). For chunk j of a block and the q8_1
// codes q of its activation block, isum = ls0 * sum_{i<16} w_i q_i + ls1 * sum_{i>=16} w_i q_i, iq_decode.cuh's
// chunk_isum for fmt_iq1_m: the same ls0 and ls1 (2 s + 1 from the same 3-bit fields), the same signed weight
// bytes w_i (below), summed by dp4a (exact integers: the order is free), and the chunk's scale the float d of
// the block (fmt_iq1_m::block_d's 16 bits from the same four nibbles; the 1/8 of dw = d / 8 is in the staged
// activation scale: exact, a power of two). mmvq_onecol's fmaf(d * d_act, (float)isum, acc) takes one factor a
// chunk: iq1_m's two scales are inside the integer, as in old's chunk_isum, so the product kernel needs no change.
//
// The weight bytes, by construction: fmt_iq1_m::decode gives group G's two words as
//   iq1_group: sel = nib | (neg ? 0x44444444 : 0), lo = PRMT(K0, K1, sel), hi = PRMT(K0, K1, sel >> 16)
// with nib = iq1s_grid_nib[index], index = qs byte G | (qh nibble G & 7) << 8, neg = qh nibble G's bit 3. This
// decoder stages those selectors already made: entry e (12 bits: qs byte G | the whole qh nibble G << 8, so bit
// 11 is neg) is the pair (sel, sel >> 16) of nib = iq1s_grid_nib[e & 0x7FF] and neg = e >> 11, built by the
// same expression from the same table word. A group's two PRMTs then read (K0, K1) (the format's own sources,
// in registers) with the staged selectors: byte for byte the format's w. No code sum, no delta through the dot:
// the delta sign selects a table half, where iq1_s's tern (one delta a chunk) folds it into sum q. Tern's
// pair trick (one 16-bit selector for both PRMTs over 9 ternary pairs) has no room for iq1_m's delta per group
// (18 pairs, 16 nibble states), and its sum-q form would need four code sums a block (one a group), which
// mmvq_onecol's staging (one code sum) does not have; this form needs nothing of the kernel.
//
// Against new's iq1_m decode (mmvq_new with the format's decode: per group the 11-bit index from two fields, an
// LDS of the nibble word, the neg OR, a shift for the high selector): the index is one PRMT (the high nibbles
// spread to bytes once a chunk, unmasked: the delta bit rides along), no OR, no shift (WIDE: one LDS.64 a group
// gives both selectors; !WIDE: one LDS.32 and a shift, half the table); fixed per-lane field pointers; ls0 and
// ls1 from the lane's scale field at a per-lane constant shift.
#pragma once
// the product's one-column decoders: LaneConst, word_at, the loads and types
#include "mmvq/onecol_dec.cuh"

namespace onecol {

// A planted-defect build of the host test overrides these (experiments/mmvq_onecol1m/tests/test_mmvq_onecol1m.py);
// the kernels never do.
#ifndef ONECOL1M_NEG
#define ONECOL1M_NEG 0x44444444u  // iq1_group's neg: every selector nibble moved to K1's bytes (8 g - 1)
#endif
#ifndef ONECOL1M_NEG_BIT
#define ONECOL1M_NEG_BIT 11  // the entry's bit that is qh nibble G's bit 3
#endif
#ifndef ONECOL1M_LS1_SHIFT
#define ONECOL1M_LS1_SHIFT 2  // ls1 = 2 s1 + 1: the second 3-bit field (bits 3-5) moved to bits 1-3
#endif
#ifndef ONECOL1M_D_SEL
#define ONECOL1M_D_SEL 0x7531u  // the top bytes of the four scale words (d's nibbles)
#endif

// A row's field pointers for the lane's chunk j: qs (4-byte aligned: blocks are 56 bytes, rows 16-byte aligned),
// qh (2-byte) and the scale words (8-byte aligned); Raw, what one load reads: the four low index bytes, the four
// qh nibbles, the 8 scale bytes (16 3-bit scales and d's nibbles).
struct Iq1mPtr {
    struct Raw {
        uint32_t qs, qh, sc0, sc1;
    };
    static constexpr int STEP = LaneWalk<fmt_iq1_m>::STEP;
    static_assert(STEP % 8 == 0, "a lane's next block must keep every field's alignment");
    const uint32_t* qs;
    const uint16_t* qh;
    const uint2* sc;
    Iq1mPtr() = default;
    __device__ __forceinline__ Iq1mPtr(const uint8_t* block, int j)
        : qs(reinterpret_cast<const uint32_t*>(block + layout::iq1_m::QS + 4 * j)),
          qh(reinterpret_cast<const uint16_t*>(block + layout::iq1_m::QH + 2 * j)),
          sc(reinterpret_cast<const uint2*>(block + layout::iq1_m::SCALES)) {}
    __device__ __forceinline__ void advance() {
        qs += STEP / 4;
        qh += STEP / 2;
        sc += STEP / 8;
    }
    __device__ __forceinline__ Raw load(uint32_t /*shift*/) const {
        const uint2 s = __ldg(sc);
        return Raw{__ldg(qs), (uint32_t)__ldg(qh), s.x, s.y};
    }
};

// The block's fp16 d: the top nibble of each of the four u16 scale words (fmt_iq1_m::block_d's bits). PRMT puts
// the words' top bytes in bytes 0-3 (nibble k at bit 8k + 4); byte k of v is then nibble k | nibble k+1 << 4
// (the LOP3 takes bits 0-3 of each byte from t >> 4 and bits 4-7 from t >> 8), and bytes 0 and 2 are the bits.
__device__ __forceinline__ uint32_t iq1m_d_bits(uint32_t sc0, uint32_t sc1) {
    const uint32_t t = prmt(sc0, sc1, ONECOL1M_D_SEL);
    const uint32_t v = ((t >> 4) & 0x0F0F0F0Fu) | ((t >> 8) & 0xF0F0F0F0u);
    return prmt(v, 0u, 0x4420u);
}

// The qh nibbles one a byte (byte G = nibble G, its delta bit 3 kept): PRMT of qh and qh >> 4 gives bytes
// (n0 n1, n1 n2, n2 n3, n3 0); the mask keeps each byte's low nibble.
__device__ __forceinline__ uint32_t iq1m_high_bytes(uint32_t qh) {
    return prmt(qh, qh >> 4, 0x5140u) & 0x0F0F0F0Fu;
}

// The selector pair of staged entry e (0-4095): iq1_group's sel and sel >> 16 for nib = grid[e & 0x7FF] and
// neg = bit 11 (ONECOL1M_NEG_BIT) of e.
__host__ __device__ __forceinline__ uint32_t iq1m_sel(uint32_t nib, uint32_t e) {
    return ((e >> ONECOL1M_NEG_BIT) & 1u) ? (nib | ONECOL1M_NEG) : nib;
}

// WIDE: 4096 entries of 8 bytes (sel, sel >> 16), one LDS.64 a group (32 KiB); else 4096 words sel (16 KiB), one
// LDS.32 and a shift a group. Then 32 copies each of K0 and K1 (read at lane-dependent addresses: ptxas keeps them
// in registers, as Iq1sTern's A_LO and A_HI).
template <bool WIDE>
struct Iq1mSel {
    using F = fmt_iq1_m;
    using Ptr = Iq1mPtr;
    using Raw = Iq1mPtr::Raw;
    static constexpr float D_ACT_SCALE = 0.125f;  // dw = d / 8
    static constexpr bool CODE_SUM = false;
    static constexpr int ENTRIES = 2 * F::TABLE_WORDS;  // the 11-bit index and the delta bit
    static constexpr int ENTRY_WORDS = WIDE ? 2 : 1;
    static constexpr int GRID_WORDS = ENTRIES * ENTRY_WORDS;
    static constexpr int SHARED_WORDS = GRID_WORDS + 64;

    __device__ __forceinline__ static void stage(uint32_t* sh, int tid, int nthreads) {
        for (int i = tid; i < GRID_WORDS; i += nthreads) {
            const uint32_t e = (uint32_t)i / ENTRY_WORDS;
            const uint32_t sel = iq1m_sel(F::table()[e % F::TABLE_WORDS], e);
            sh[i] = (WIDE && (i & 1)) ? sel >> 16 : sel;
        }
        for (int i = tid; i < 32; i += nthreads) {
            sh[GRID_WORDS + i] = F::K0;
            sh[GRID_WORDS + 32 + i] = F::K1;
        }
    }
    __device__ __forceinline__ static uint32_t shift(const uint8_t*, int) { return 0u; }
    // bytes: the bit position of the lane's two 3-bit scales in the 8 scale bytes (chunk j: word j / 2, bits
    // 6 (j & 1)); k0, k1: K0 and K1.
    __device__ __forceinline__ static LaneConst lane_const(const uint32_t* sh, int lane) {
        const int j = lane % F::CHUNKS;
        return LaneConst{(uint32_t)(16 * (j / 2) + 6 * (j & 1)), sh[GRID_WORDS + lane], sh[GRID_WORDS + 32 + lane]};
    }
    __device__ __forceinline__ static float d(const Raw& r) {
        return fp16_bits_to_float((uint16_t)iq1m_d_bits(r.sc0, r.sc1));
    }

    // Entry e's two selectors: one 8-byte load (WIDE), or one word and its high half.
    __device__ __forceinline__ static uint2 selectors(const uint32_t* sh, uint32_t e) {
        if constexpr (WIDE) return *reinterpret_cast<const uint2*>(reinterpret_cast<const uint8_t*>(sh) + e * 8u);
        const uint32_t sel = word_at(sh, e * 4u);
        return uint2{sel, sel >> 16};
    }
    template <int G>
    __device__ __forceinline__ static int group(const uint32_t* sh, uint32_t qs, uint32_t high, const LaneConst& lc,
                                                const int q[8], int s) {
        // qs byte G, high byte G (the nibble with its delta bit), then bytes of high byte 0's sign (zero: <= 15)
        const uint32_t e = prmt(qs, high, 0xCC00u | ((4u + G) << 4) | G);
        const uint2 sel = selectors(sh, e);
        s = __dp4a((int)prmt(lc.k0, lc.k1, sel.x), q[2 * G], s);
        return __dp4a((int)prmt(lc.k0, lc.k1, sel.y), q[2 * G + 1], s);
    }
    // ls0 * (groups 0, 1) + ls1 * (groups 2, 3): ls = 2 s + 1 of the lane's two 3-bit fields.
    __device__ __forceinline__ static int isum(const uint32_t* sh, const Raw& r, const LaneConst& lc, const int q[8],
                                               int /*code_sum2*/) {
        const uint32_t high = iq1m_high_bytes(r.qh);
        const int s0 = group<1>(sh, r.qs, high, lc, q, group<0>(sh, r.qs, high, lc, q, 0));
        const int s1 = group<3>(sh, r.qs, high, lc, q, group<2>(sh, r.qs, high, lc, q, 0));
        const uint32_t sw = (lc.bytes < 32u ? r.sc0 : r.sc1) >> (lc.bytes & 31u);
        const int ls0 = (int)(((sw << 1) & 0xEu) | 1u), ls1 = (int)(((sw >> ONECOL1M_LS1_SHIFT) & 0xEu) | 1u);
        return ls0 * s0 + ls1 * s1;
    }
};

}  // namespace onecol
