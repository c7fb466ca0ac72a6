// onecol_dec.cuh: the one-column decoders of mmvq_onecol.cu (mmvq's `new` runs them for the one-column iq2_xxs and
// iq1_s passes of tall shapes: families/mmvq_onecol.py says where): iq2_xxs's Iq2xxsMul7 and iq1_s's Iq1sTern, moved
// verbatim from experiments/mmvq_onecol (which keeps its other decoders and includes this file). Host-compilable,
// like kernels_src/common: tests/iq_host/iq_host.cpp (dot_onecol) and the experiment's host driver run the same code
// on the CPU.
//
// ARITHMETIC CONTRACT: mmvq.cu's and iq_decode.cuh's. Each decoder gives, for chunk j of a block and the q8_1
// codes q of its activation block, exactly the format's chunk integer isum = ls * sum_i w_i q_i (the same ls, the
// same signed weight bytes w_i as F::decode, summed by dp4a: exact integers, so the order is free), and the
// chunk's weight scale as the float d of the block's fp16 field. The kernel pairs d with the activation scale
// staged times D_ACT_SCALE (the format's dw = d * D_ACT_SCALE, a power of two): d * (d_act * 2^-k) is the real
// number d * d_act * 2^-k, exact in float (11-bit significands, far from underflow), so it is the same float
// as (d * 2^-k) * d_act, which old computes. Hence the same fmaf operands, the same roundings.
//
// What changes against mmvq_new's decode (per row and chunk of 32 weights, one lane):
//   - the loads: fixed per-lane field pointers that advance a constant step (no address recomputation), the
//     2-byte aligned code words by aligned loads and a funnel shift of a per-lane constant amount;
//   - the scale: ls and d only (the factor 2^-k of dw is in the staged activation scale);
//   - no table and no shared load added (docs/PERF_NOTES.md v13): iq2_xxs's selector bits by one multiply a group
//     (Iq2xxsMul7; weights, grid nibbles and activation codes in one permuted order within a group); iq1_s's two
//     ternary values a selector nibble, one selector for both PRMTs of a group, the delta through the dot
//     (Iq1sTern). Each section below says why it is exact.
#pragma once
#include "common/decoders.cuh"  // iq_decode.cuh (formats, tables), or_and

namespace onecol {
using namespace siq;

// ---- loads -------------------------------------------------------------------------------------------------
// The 8 bytes at a 2-byte aligned address as two words, from the three aligned words at `a` and a funnel shift of
// `shift` (0 or 16) bits, the values ld_words_a2w gives (the third word may lie 2 bytes past them: device buffers
// keep 16 readable bytes after the last row).
__device__ __forceinline__ void two_words_at(const uint32_t* a, uint32_t shift, uint32_t& lo, uint32_t& hi) {
    const uint32_t w0 = __ldg(a), w1 = __ldg(a + 1), w2 = __ldg(a + 2);
    lo = __funnelshift_r(w0, w1, shift);
    hi = __funnelshift_r(w1, w2, shift);
}

// The shift that aligns the 4-byte values at p (2-byte aligned) from its aligned words.
__device__ __forceinline__ uint32_t word_shift(const uint8_t* p) {
    return (uint32_t)(reinterpret_cast<unsigned long long>(p) & 2u) * 8u;
}

// The word at byte offset `bytes` of a table (the offsets are computed in bytes so that ptxas needs no scaling).
__device__ __forceinline__ uint32_t word_at(const uint32_t* table, uint32_t bytes) {
    return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(table) + bytes);
}

// What a lane holds for the whole kernel: its table copy's byte offset and a table constant in a register. The
// constant is read from shared memory at a lane-dependent address (each lane its own copy), so ptxas keeps it in
// a register rather than re-materializing it from a uniform register before each PRMT (8 IMADs a chunk).
struct LaneConst {
    uint32_t bytes;
    uint32_t k0;
    uint32_t k1;  // a second constant (Iq1sTern's A_HI); 0 where unused
};

// ---- iq2_xxs --------------------------------------------------------------------------------------------------
// One chunk's fields: the four grid index bytes, the four sign indexes with the scale, the fp16 d.
struct Iq2xxsRaw {
    uint32_t idx, aux, d16;
};

// A row's field pointers for the lane's chunk: its 8 code bytes' address rounded down to a W (the unit its loads
// read) and its block's d.
template <class W>
struct Iq2xxsFields {
    const W* qs;
    const uint16_t* d;
    static constexpr int STEP = LaneWalk<fmt_iq2_xxs>::STEP;
    static_assert(STEP % sizeof(W) == 0, "a lane's next block must keep its offset in a W");
    Iq2xxsFields() = default;
    __device__ __forceinline__ Iq2xxsFields(const uint8_t* block, int j)
        : qs(reinterpret_cast<const W*>(reinterpret_cast<unsigned long long>(block + layout::iq2_xxs::QS + 8 * j) &
                                        ~(unsigned long long)(sizeof(W) - 1))),
          d(reinterpret_cast<const uint16_t*>(block)) {}
    __device__ __forceinline__ void advance() {
        qs += STEP / (int)sizeof(W);
        d += STEP / 2;
    }
};

// The code words by three aligned 4-byte loads.
struct Iq2xxsPtr : Iq2xxsFields<uint32_t> {
    using Iq2xxsFields::Iq2xxsFields;
    Iq2xxsPtr() = default;
    __device__ __forceinline__ Iq2xxsRaw load(uint32_t shift) const {
        Iq2xxsRaw r;
        two_words_at(qs, shift, r.idx, r.aux);
        r.d16 = (uint32_t)__ldg(d);
        return r;
    }
};

// ls * sum w q over decoder D's four groups: ls = 2 * (aux >> 28) + 1 (bit 27, the last sign index's top bit, is
// overwritten by the 1).
template <class D>
__device__ __forceinline__ int iq2xxs_isum(const uint32_t* sh, const Iq2xxsRaw& r, const LaneConst& lc, const int q[8]) {
    int s = D::template group<0>(sh, r, lc, q, 0);
    s = D::template group<1>(sh, r, lc, q, s);
    s = D::template group<2>(sh, r, lc, q, s);
    s = D::template group<3>(sh, r, lc, q, s);
    return (int)((r.aux >> 27) | 1u) * s;
}

// What every iq2_xxs one-column decoder shares: the format, its loads and fields, the scale (dw = d / 8) and the
// grid's 256 nibble words. A decoder adds stage, lane_const, group and isum (and its SHARED_WORDS).
struct Iq2xxsOneColBase {
    using F = fmt_iq2_xxs;
    using Ptr = Iq2xxsPtr;
    using Raw = Iq2xxsRaw;
    static constexpr float D_ACT_SCALE = 0.125f;  // dw = d / 8
    static constexpr bool CODE_SUM = false;       // no sum q staged
    static constexpr int GRID_WORDS = F::TABLE_WORDS;

    __device__ __forceinline__ static uint32_t shift(const uint8_t* first_block, int j) {
        return word_shift(first_block + layout::iq2_xxs::QS + 8 * j);
    }
    __device__ __forceinline__ static float d(const Raw& r) { return fp16_bits_to_float((uint16_t)r.d16); }
};

// ---- iq2_xxs, no added table: the sign selectors by one multiply (Iq2xxsMul7) ------------------------------
// Planted-defect builds of the host tests override these two (tests/iq_host, experiments/mmvq_onecol/tests); the
// kernels never do.
#ifndef ONECOL_MUL7_SPREAD
#define ONECOL_MUL7_SPREAD 0x204081u  // 1 + 2^7 + 2^14 + 2^21
#endif
#ifndef ONECOL_MUL7_PARITY_BIT
#define ONECOL_MUL7_PARITY_BIT 28
#endif

// Why one multiply places 7 signs: x (the 7-bit sign index) times 1 + 2^7 + 2^14 + 2^21 is four copies of x at
// bits 0, 7, 14, 21. Bit j of copy t lands at 7t + j, distinct for j < 7, t < 4 (no two partial products share a
// bit: no carries), and 7t + j is a multiple of 4 exactly when j = t or j = t + 4. So bit 4p holds sign PI[p] of
// the group, PI = (0, 4, 1, 5, 2, 6, 3), and bit 28 (the product is below 2^28) is free for the 8th sign, the
// index's parity (bit 0 of its POPC). One IMAD, one POPC and one LEA a group, where iq2_sel spends two masked
// multiplies, two masks and a shift of the POPC (ksign_nibbles' spread needs two: its bits go to 4i + 2 in order).
// Selector nibble p therefore decodes weight PI[p]: its sign in bit 0, and the restaged grid word's code (0-2) of
// weight PI[p] in bits 1-2; PRMT over (A, B) = (+m0, -m0, +m1, -m1 | +m2, -m2, 0, 0) turns 2 code + sign into the
// signed grid byte. The activations are staged in the same order (ActPairs), so each dp4a pairs weight PI[p] with
// code PI[p]: the same 32 products as old's, summed exactly.
struct Mul7Order {
    static constexpr int PI[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // weight of selector nibble p
    // The activation code bytes of a group (a: values 0-3, b: 4-7) in nibble order: lo = (0, 4, 1, 5), hi = (2, 6, 3, 7).
    static constexpr uint32_t ACT_SEL_LO = 0x5140u, ACT_SEL_HI = 0x7362u;
};

// The 8 PRMT source bytes: byte 2c + s is grid magnitude c (K0's byte c), negated when s = 1 (K1's byte c).
__host__ __device__ __forceinline__ constexpr uint32_t mul7_source(uint32_t k0, uint32_t k1, int half) {
    return half == 0 ? (k0 & 0xFFu) | (k1 & 0xFFu) << 8 | (k0 & 0xFF00u) << 8 | (k1 & 0xFF00u) << 16
                     : (k0 >> 16 & 0xFFu) | (k1 >> 16 & 0xFFu) << 8;
}

// Grid word `nib` (code of value i in nibble i, bits 0-1) restaged: code of value PI[p] times 2 in nibble p.
__device__ __forceinline__ uint32_t mul7_grid_word(uint32_t nib) {
    uint32_t out = 0;
#pragma unroll
    for (int p = 0; p < 8; ++p) out |= ((nib >> (4 * Mul7Order::PI[p])) & 3u) << (4 * p + 1);
    return out;
}

struct Iq2xxsMul7 : Iq2xxsOneColBase {
    using Order = Mul7Order;
    static constexpr uint32_t A = mul7_source(F::K0, F::K1, 0), B = mul7_source(F::K0, F::K1, 1);
    static constexpr int SHARED_WORDS = GRID_WORDS + 32;  // the restaged grid, then 32 copies of A, one a lane

    __device__ __forceinline__ static void stage(uint32_t* sh, int tid, int nthreads) {
        for (int i = tid; i < GRID_WORDS; i += nthreads) sh[i] = mul7_grid_word(F::table()[i]);
        for (int i = tid; i < 32; i += nthreads) sh[GRID_WORDS + i] = A;
    }
    // A in a register (read at a lane-dependent address: ptxas keeps it rather than re-materializing it
    // before each PRMT).
    __device__ __forceinline__ static LaneConst lane_const(const uint32_t* sh, int lane) {
        return LaneConst{0u, sh[GRID_WORDS + lane]};
    }
    // Bit 4p: the sign of value PI[p]; bit 28: the 8th sign (the index's parity); other bits junk, masked by the caller.
    __device__ __forceinline__ static uint32_t signs(uint32_t x) {
        return x * ONECOL_MUL7_SPREAD + ((uint32_t)__popc(x) << ONECOL_MUL7_PARITY_BIT);
    }
    template <int G>
    __device__ __forceinline__ static int group(const uint32_t* sh, const Raw& r, const LaneConst& lc,
                                                const int q[8], int s) {
        const uint32_t nib = word_at(sh, prmt(r.idx, 0u, 0x4440u + G) * 4u);
        const uint32_t sel = or_and(nib, signs((r.aux >> (7 * G)) & 0x7Fu), 0x11111111u);
        s = __dp4a((int)prmt(lc.k0, B, sel), q[2 * G], s);
        return __dp4a((int)prmt(lc.k0, B, sel >> 16), q[2 * G + 1], s);
    }
    __device__ __forceinline__ static int isum(const uint32_t* sh, const Raw& r, const LaneConst& lc, const int q[8],
                                               int /*code_sum2*/) {
        return iq2xxs_isum<Iq2xxsMul7>(sh, r, lc, q);
    }
};

// The activation code words of a block as a decoder reads them: its Order's byte order within each group (words
// 2G, 2G + 1), else as staged (old's order).
template <class D, class = void>
struct ActPairs {
    __device__ __forceinline__ static void apply(uint32_t (&)[8]) {}
};
template <class D>
struct ActPairs<D, decltype((void)D::Order::ACT_SEL_LO)> {
    __device__ __forceinline__ static void apply(uint32_t (&w)[8]) {
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t a = w[2 * g], b = w[2 * g + 1];
            w[2 * g] = prmt(a, b, D::Order::ACT_SEL_LO);
            w[2 * g + 1] = prmt(a, b, D::Order::ACT_SEL_HI);
        }
    }
};

// ---- iq1_s -------------------------------------------------------------------------------------------------
struct Iq1sRaw {
    uint32_t qs, qh, d16;  // four low index bytes; 3 high bits x4, scale bits 12-14, delta sign bit 15; fp16 d
};

struct Iq1sPtr {
    const uint16_t* qs;
    const uint16_t* qh;
    const uint16_t* d;
    static constexpr int STEP = LaneWalk<fmt_iq1_s>::STEP;
    Iq1sPtr() = default;
    __device__ __forceinline__ Iq1sPtr(const uint8_t* block, int j)
        : qs(reinterpret_cast<const uint16_t*>(block + layout::iq1_s::QS + 4 * j)),
          qh(reinterpret_cast<const uint16_t*>(block + layout::iq1_s::QH + 2 * j)),
          d(reinterpret_cast<const uint16_t*>(block)) {}
    __device__ __forceinline__ void advance() {
        qs += STEP / 2;
        qh += STEP / 2;
        d += STEP / 2;
    }
    __device__ __forceinline__ Iq1sRaw load(uint32_t /*shift*/) const {
        const uint32_t lo = __ldg(qs), hi = __ldg(qs + 1);
        return Iq1sRaw{lo | (hi << 16), (uint32_t)__ldg(qh), (uint32_t)__ldg(d)};
    }
};

// The high index bits of the four groups, one a byte: byte G = (qh >> 3G) & 7. Fields 0 and 2 (and 1 and 3)
// are spread by one multiply each: the copies it makes land on distinct bits (no carries), and the masks keep
// the wanted ones.
__device__ __forceinline__ uint32_t iq1_high_bytes(uint32_t qh) {
    const uint32_t even = (qh & 0x1C7u) * 0x401u;   // field 0 at bits 0-2 (and 10-12), field 2 at 16-18 (and 6-8)
    const uint32_t odd = (qh & 0xE38u) * 0x8020u;   // field 1 at bits 8-10 (and 18-20), field 3 at 24-26 (and 14-16)
    return (even & 0x00070007u) | (odd & 0x07000700u);
}

// The 11-bit grid index of group G: byte G of qs, with byte G of the high bytes above it. One PRMT: selector
// nibbles 0xC replicate the sign of byte 0 of `high` (at most 7, so zero bytes).
template <int G>
__device__ __forceinline__ uint32_t iq1_index(uint32_t qs, uint32_t high) {
    return prmt(qs, high, 0xCC00u | ((4u + G) << 4) | G);
}

// What every iq1_s one-column decoder shares: the format, its loads and fields, the scale (dw = d / 8). A decoder
// adds CODE_SUM (and CODE_SUM_FACTOR), its tables (GRID_WORDS, SHARED_WORDS, stage), lane_const, group and isum.
struct Iq1sOneColBase {
    using F = fmt_iq1_s;
    using Ptr = Iq1sPtr;
    using Raw = Iq1sRaw;
    static constexpr float D_ACT_SCALE = 0.125f;  // dw = d / 8

    __device__ __forceinline__ static uint32_t shift(const uint8_t*, int) { return 0u; }
    __device__ __forceinline__ static float d(const Raw& r) { return fp16_bits_to_float((uint16_t)r.d16); }
};

// ---- iq1_s, no added table: two ternary values a selector nibble (Iq1sTern) ---------------------------------
// Planted-defect builds of the host tests override this (tests/iq_host, experiments/mmvq_onecol/tests); the kernels
// never do.
#ifndef ONECOL_TERN_REPLICATED
#define ONECOL_TERN_REPLICATED 12  // the state of the pair (-1, 0): byte 4's sign replicated
#endif

// Why one selector serves both PRMTs of a group: the grid's values g (-1, 0, 1; weight 8g + delta) of positions p
// and p + 4 share selector nibble p, and the two PRMTs read it over different sources, (A_LO, B_LO) giving g_p and
// (A_HI, B_HI) giving g_{p+4}. The 9 pairs need 9 of a nibble's states: plain states 0-7 pick byte v of the 8
// source bytes (TernPairs: 8 pairs), and state 12 (bit 3 set: byte 4's sign replicated) gives 0xFF from B_LO's
// 0xFF and 0x00 from B_HI's 0x01, the 9th pair (-1, 0). So the high PRMT needs no shift (the nibble table's
// PRMT-SHF-PRMT becomes PRMT-PRMT), and a group's selector is 16 bits: the table is 2048 u16 (4 KiB; the nibble
// table has 8). The delta through the dot: sum (8g + delta) q = 8 sum g q + delta sum q, with sum q (the
// activation block's code sum, exact) staged beside d_act; the same integer as old's, so the same float.
struct TernPairs {
    // (g_p, g_{p+4}) of plain state v: byte v of the low and of the high source.
    static constexpr int LO[8] = {0, 1, 0, 1, -1, 0, 1, -1};
    static constexpr int HI[8] = {0, 0, 1, 1, 1, -1, -1, -1};
    // Source bytes 4 * half .. 4 * half + 3 of values v (LO or HI).
    __host__ __device__ static constexpr uint32_t source(const int (&v)[8], int half) {
        uint32_t out = 0;
        for (int b = 0; b < 4; ++b) out |= (uint32_t)(uint8_t)(int8_t)v[4 * half + b] << (8 * b);
        return out;
    }
    // The state of codes (g + 1) lo, hi; as a 64-bit constant of 9 nibbles so that device code indexes no array.
    __host__ __device__ static constexpr unsigned long long states() {
        unsigned long long out = 0;
        for (int lo = 0; lo < 3; ++lo)
            for (int hi = 0; hi < 3; ++hi) {
                unsigned long long st = ONECOL_TERN_REPLICATED;
                for (int v = 7; v >= 0; --v)
                    if (LO[v] == lo - 1 && HI[v] == hi - 1) st = (unsigned long long)v;
                out |= st << (4 * (3 * lo + hi));
            }
        return out;
    }
};

struct Iq1sTern : Iq1sOneColBase {
    static constexpr bool CODE_SUM = true;  // sum q staged beside d_act
    static constexpr int CODE_SUM_FACTOR = 1;
    static constexpr uint32_t A_LO = TernPairs::source(TernPairs::LO, 0), B_LO = TernPairs::source(TernPairs::LO, 1);
    static constexpr uint32_t A_HI = TernPairs::source(TernPairs::HI, 0), B_HI = TernPairs::source(TernPairs::HI, 1);
    static constexpr unsigned long long STATES = TernPairs::states();
    static constexpr int GRID_WORDS = F::TABLE_WORDS / 2;  // 2048 u16 selectors
    static constexpr int SHARED_WORDS = GRID_WORDS + 64;   // then 32 copies of A_LO and 32 of A_HI

    // Grid entry `nib` (code g + 1 of value i in nibble i) as 4 selector nibbles: nibble p, the pair (p, p + 4).
    __device__ __forceinline__ static uint32_t selector(uint32_t nib) {
        uint32_t out = 0;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const uint32_t lo = (nib >> (4 * p)) & 3u, hi = (nib >> (4 * p + 16)) & 3u;
            out |= (uint32_t)((STATES >> (4 * (3 * lo + hi))) & 0xFu) << (4 * p);
        }
        return out;
    }
    __device__ __forceinline__ static void stage(uint32_t* sh, int tid, int nthreads) {
        for (int i = tid; i < GRID_WORDS; i += nthreads)
            sh[i] = selector(F::table()[2 * i]) | selector(F::table()[2 * i + 1]) << 16;
        for (int i = tid; i < 32; i += nthreads) {
            sh[GRID_WORDS + i] = A_LO;
            sh[GRID_WORDS + 32 + i] = A_HI;
        }
    }
    // A_LO and A_HI in registers (read at lane-dependent addresses: ptxas keeps them, as Iq2xxsMul7's A).
    __device__ __forceinline__ static LaneConst lane_const(const uint32_t* sh, int lane) {
        return LaneConst{0u, sh[GRID_WORDS + lane], sh[GRID_WORDS + 32 + lane]};
    }

    template <int G>
    __device__ __forceinline__ static int group(const uint32_t* sh, uint32_t qs, uint32_t high, const LaneConst& lc,
                                                const int q[8], int s) {
        const uint32_t i = iq1_index<G>(qs, high);
        const uint32_t sel = *reinterpret_cast<const uint16_t*>(reinterpret_cast<const uint8_t*>(sh) + i * 2u);
        s = __dp4a((int)prmt(lc.k0, B_LO, sel), q[2 * G], s);
        return __dp4a((int)prmt(lc.k1, B_HI, sel), q[2 * G + 1], s);
    }
    // ls * (8 sum g q + delta sum q), ls = 2 * ((qh >> 12) & 7) + 1, delta = -1 where qh bit 15 is set.
    __device__ __forceinline__ static int isum(const uint32_t* sh, const Raw& r, const LaneConst& lc, const int q[8],
                                               int code_sum) {
        const uint32_t high = iq1_high_bytes(r.qh);
        int s = group<0>(sh, r.qs, high, lc, q, 0);
        s = group<1>(sh, r.qs, high, lc, q, s);
        s = group<2>(sh, r.qs, high, lc, q, s);
        s = group<3>(sh, r.qs, high, lc, q, s);
        const int delta_sum = (r.qh & 0x8000u) ? -code_sum : code_sum;
        return (2 * (int)((r.qh >> 12) & 7u) + 1) * (8 * s + delta_sum);
    }
};

}  // namespace onecol
