// onecol_dec.cuh: experiments/mmvq_onecol's own one-column decoders, beside the product's (kernels_src/mmvq/
// onecol_dec.cuh: Iq2xxsMul7 and Iq1sTern, which `new` runs since they moved there, with the loads, fields and
// ActPairs every decoder here shares): the v12 table decoders and their controls (iq2_xxs stab / stab16 / arith,
// iq1_s bytes / nib) and mul7w (mul7 with two 8-byte code loads). mmvq_onecol.cu runs them in the product's kernel;
// the host test (tests/onecol_host.cpp) runs the same code on the CPU. Host-compilable, like kernels_src/common.
//
// ARITHMETIC CONTRACT: the product onecol_dec.cuh's (read it first): each decoder gives the format's exact chunk
// integer and the block's d, the activation scale staged times D_ACT_SCALE.
//
// What each changes against mmvq_new's decode (per row and chunk of 32 weights, one lane), beside the product's
// loads and scale:
//   - iq2_xxs: the sign selector bits of each group from a 128-entry shared table (SignTab, N interleaved copies,
//     lane l reading copy l % N) instead of ~10 integer instructions (Iq2xxsOneCol<true>); the control
//     Iq2xxsOneCol<false> keeps decoders.cuh's arithmetic selector (iq2_sel); Iq2xxsMul7W: the product's mul7 with
//     the code words by two 8-byte loads;
//   - iq1_s: the delta's sign picks the table word (K0 or K1) once per chunk instead of an OR per group
//     (Iq1sOneCol<false>); or (Iq1sOneCol<true>) a 2048 x 8-byte table of the positive-delta weight bytes
//     (8g + 1, one LDS.64 a group, no PRMT) and the negative delta through the dot: the bytes 8g - 1 are
//     8g + 1 - 2, so sum w q = sum (8g + 1) q - 2 sum q, with sum q (the block's code sum) staged beside d_act.
#pragma once
#include "mmvq/onecol_dec.cuh"  // the product's: loads, fields, LaneConst, ActPairs, Iq2xxsMul7, Iq1sTern

namespace onecol {
using namespace siq;

// ---- iq2_xxs -----------------------------------------------------------------------------------------------
// The sign selector table: entry k (the 7-bit sign index) holds ksign_nibbles(k), bit 4i + 2 set where value i
// of the group is negated (the 8th sign is the index's parity), in N interleaved copies (copy c of entry k at
// word k * N + c).
template <int N>
struct SignTab {
    static constexpr int WORDS = 128 * N;
    static_assert(N == 1 || N == 2 || N == 4 || N == 8 || N == 16 || N == 32, "copies: a power of two");
    static constexpr uint32_t SHIFT = 2 + (N >= 2) + (N >= 4) + (N >= 8) + (N >= 16) + (N >= 32);  // log2(4 N)
    __device__ __forceinline__ static void stage(uint32_t* dst, int tid, int nthreads) {
        for (int i = tid; i < WORDS; i += nthreads) dst[i] = ksign_nibbles((uint32_t)(i / N));
    }
    // The lane's copy as a byte offset.
    __device__ __forceinline__ static uint32_t lane_bytes(int lane) { return (uint32_t)(lane % N) * 4u; }
    // The selector bits of the 7-bit index at bit 7 * G of aux.
    template <int G>
    __device__ __forceinline__ static uint32_t bits(const uint32_t* tab, uint32_t aux, uint32_t lane_bytes) {
        constexpr int AT = 7 * G;  // the field's lowest bit; moved to bit SHIFT
        const uint32_t scaled = AT >= (int)SHIFT ? aux >> (AT - SHIFT) : aux << (SHIFT - AT);
        return word_at(tab, or_and(lane_bytes, scaled, 0x7Fu << SHIFT));
    }
};

// TABLE: the sign selectors from SignTab<COPIES> (else iq2_sel's arithmetic). Shared: the grid's nibble words
// (256), then the sign table.
template <bool TABLE, int COPIES = 1>
struct Iq2xxsOneCol : Iq2xxsOneColBase {
    using Signs = SignTab<COPIES>;
    static constexpr int SIGN_WORDS = TABLE ? Signs::WORDS : 0;
    static constexpr int SHARED_WORDS = GRID_WORDS + SIGN_WORDS + 32;  // then 32 copies of K0, one a lane

    __device__ __forceinline__ static void stage(uint32_t* sh, int tid, int nthreads) {
        for (int i = tid; i < GRID_WORDS; i += nthreads) sh[i] = F::table()[i];
        if constexpr (TABLE) Signs::stage(sh + GRID_WORDS, tid, nthreads);
        for (int i = tid; i < 32; i += nthreads) sh[GRID_WORDS + SIGN_WORDS + i] = F::K0;
    }
    // After the barrier.
    __device__ __forceinline__ static LaneConst lane_const(const uint32_t* sh, int lane) {
        return LaneConst{Signs::lane_bytes(lane), sh[GRID_WORDS + SIGN_WORDS + lane]};
    }

    template <int G>
    __device__ __forceinline__ static int group(const uint32_t* sh, const Raw& r, const LaneConst& lc,
                                                const int q[8], int s) {
        const uint32_t nib = word_at(sh, prmt(r.idx, 0u, 0x4440u + G) * 4u);
        uint32_t sel;
        if constexpr (TABLE)
            sel = nib | Signs::template bits<G>(sh + GRID_WORDS, r.aux, lc.bytes);
        else
            sel = iq2_sel<false>(r.aux >> (7 * G), nib);
        s = __dp4a((int)prmt(lc.k0, F::K1, sel), q[2 * G], s);
        return __dp4a((int)prmt(lc.k0, F::K1, sel >> 16), q[2 * G + 1], s);
    }
    __device__ __forceinline__ static int isum(const uint32_t* sh, const Raw& r, const LaneConst& lc, const int q[8],
                                               int /*code_sum2*/) {
        return iq2xxs_isum<Iq2xxsOneCol>(sh, r, lc, q);
    }
};

// ---- iq2_xxs code words by two 8-byte loads (Iq2xxsMul7W) --------------------------------------------------
// A lane's 8 code bytes start at byte o = 0, 2, 4 or 6 of an 8-byte aligned 16-byte window (o is the lane's constant:
// rows are 16-byte aligned and a lane's blocks STEP = 264 = 33 x 8 bytes apart), so two LDG.64 hold them where
// two_words_at takes three LDG.32: one weight load a row-chunk fewer, the same bytes, for three SELs on a lane-constant
// predicate. It tests the L1's load (docs/PERF_NOTES.md v13): fewer requests, a few more instructions.
// A planted-defect build of the host test overrides this (tests/test_mmvq_onecol.py); the kernels never do.
#ifndef ONECOL_PTR8_UPPER
#define ONECOL_PTR8_UPPER 32u  // 8 o from which the bytes start in the window's second word
#endif

struct Iq2xxsPtr8 : Iq2xxsFields<uint2> {
    using Iq2xxsFields::Iq2xxsFields;
    Iq2xxsPtr8() = default;
    // shift = 8 o: words 0-2 of the window from o < 4, else words 1-3, each pair funnel-shifted by 8 o mod 32.
    __device__ __forceinline__ Iq2xxsRaw load(uint32_t shift) const {
        const uint2 a = __ldg(qs), b = __ldg(qs + 1);
        const bool upper = shift >= ONECOL_PTR8_UPPER;
        const uint32_t w0 = upper ? a.y : a.x, w1 = upper ? b.x : a.y, w2 = upper ? b.y : b.x;
        Iq2xxsRaw r;
        r.idx = __funnelshift_r(w0, w1, shift);  // uses shift's low 5 bits
        r.aux = __funnelshift_r(w1, w2, shift);
        r.d16 = (uint32_t)__ldg(d);
        return r;
    }
};

struct Iq2xxsMul7W : Iq2xxsMul7 {
    using Ptr = Iq2xxsPtr8;
    __device__ __forceinline__ static uint32_t shift(const uint8_t* first_block, int j) {
        return (uint32_t)(reinterpret_cast<unsigned long long>(first_block + layout::iq2_xxs::QS + 8 * j) & 7u) * 8u;
    }
};

// BYTES: the 8-byte table of positive-delta weights and the code sum (else the nibble table, K0 or K1 per chunk).
template <bool BYTES>
struct Iq1sOneCol : Iq1sOneColBase {
    static constexpr bool CODE_SUM = BYTES;       // 2 * sum q staged beside d_act
    static constexpr int CODE_SUM_FACTOR = 2;     // the staged code sum is 2 sum q
    static constexpr int GRID_WORDS = F::TABLE_WORDS * (BYTES ? 2 : 1);
    static constexpr int SHARED_WORDS = GRID_WORDS;

    // The byte table: entry i is the two words prmt(K0, K1, nib) and prmt(K0, K1, nib >> 16) of nibble word i.
    __device__ __forceinline__ static void stage(uint32_t* sh, int tid, int nthreads) {
        for (int i = tid; i < GRID_WORDS; i += nthreads) {
            if constexpr (BYTES) {
                const uint32_t nib = F::table()[i / 2];
                sh[i] = prmt(F::K0, F::K1, (i & 1) ? nib >> 16 : nib);
            } else {
                sh[i] = F::table()[i];
            }
        }
    }
    __device__ __forceinline__ static LaneConst lane_const(const uint32_t*, int) { return LaneConst{0u, F::K0}; }

    template <int G>
    __device__ __forceinline__ static int group(const uint32_t* sh, uint32_t qs, uint32_t high, uint32_t k,
                                                const int q[8], int s) {
        const uint32_t i = iq1_index<G>(qs, high);
        uint32_t lo, hi;
        if constexpr (BYTES) {
            const uint2 w = *reinterpret_cast<const uint2*>(reinterpret_cast<const uint8_t*>(sh) + i * 8u);
            lo = w.x;
            hi = w.y;
        } else {
            const uint32_t nib = word_at(sh, i * 4u);
            lo = prmt(k, k, nib);  // the nibble codes (0-2) pick bytes 0-2 of k, K0 or K1
            hi = prmt(k, k, nib >> 16);
        }
        s = __dp4a((int)lo, q[2 * G], s);
        return __dp4a((int)hi, q[2 * G + 1], s);
    }
    // ls * sum w q, ls = 2 * ((qh >> 12) & 7) + 1. The delta's sign (qh bit 15) selects K1 (8g - 1) over K0 (8g + 1):
    // prmt(K0, K1, nib | 0x44444444) reads K1 where prmt(K0, K1, nib) reads K0, the nibble codes being 0-2
    // (iq1_group). With BYTES the words hold K0's bytes and code_sum2 = 2 sum q is subtracted instead.
    __device__ __forceinline__ static int isum(const uint32_t* sh, const Raw& r, const LaneConst&, const int q[8],
                                               int code_sum2) {
        const bool neg = r.qh >= 0x8000u;  // a u16
        const uint32_t k = neg ? F::K1 : F::K0;
        const uint32_t high = iq1_high_bytes(r.qh);
        int s = group<0>(sh, r.qs, high, k, q, 0);
        s = group<1>(sh, r.qs, high, k, q, s);
        s = group<2>(sh, r.qs, high, k, q, s);
        s = group<3>(sh, r.qs, high, k, q, s);
        if constexpr (BYTES) s -= neg ? code_sum2 : 0;
        return (2 * (int)((r.qh >> 12) & 7u) + 1) * s;
    }
};

}  // namespace onecol
