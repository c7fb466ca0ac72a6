// mma_frag.cuh: the part of a chunk's decode one lane of mmvq_mma's m16n8k32 mma needs (mmvq_mma.cu).
//
// Lane 4g + t of the mma supplies Chunk words t and 4 + t (values 4t..4t+3 and 16+4t..16+4t+3) of its
// rows, so it needs only those two words of decode()'s Chunk, with dw and ls. MmaFrag<F>::load(b, j, t,
// kv, tab) gives exactly decode(b, j)'s w[t], w[4 + t], dw and ls0 from the same bytes (the same lookups,
// the same fp16 conversion): tests/iq_host/mma_emul.h checks every lane's words against the full decode
// on the seed and edge data of tests/families/test_mmvq_mma.py. Here only one-scale formats (one chunk per
// block, or super-blocks of 8 chunks with one scale per 32 values): the mma's C is then the whole chunk
// integer before the scale, as chunk_isum's one dp4a chain is (the formats with a scale per 16 values run
// two m16n8k16 mmas a chunk through mma_frag_split.cuh's tags). The block b is in shared memory (the
// warp's group buffer), so every load here is a plain one (no __ldg: decode()'s ld_u64_a8 and
// ld_words_a2 are global-only). Host-compilable (tests/iq_host), like iq_decode.cuh.
#pragma once
#include "common/decoders.cuh"    // iq2_sel (iq2_xxs's lane pair)
#include "mmvq/mma_common.cuh"  // isum_float, MMA_MAGIC

namespace siq {

struct Frag {
    int lo;    // Chunk word t: values 4t .. 4t+3
    int hi;    // Chunk word 4 + t: values 16+4t .. 16+4t+3
    float dw;  // Chunk.dw
    int ls;    // Chunk.ls0 (== ls1)
};

template <class F>
struct MmaFrag;  // defined only for the formats mmvq_mma runs (experiments/mmvq_mma adds per-lane iq2_xxs and iq1_s)

#ifndef LANEPAIR_XOR
#define LANEPAIR_XOR 1  // the lane pairs' partner lane, t ^ 1 (tests build 2 and 3 to see the host check fail)
#endif

// 8 bytes at an 8-byte aligned address of any memory (ld_u64_a8 is the global-only form).
__device__ __forceinline__ uint2 ld_u64_any(const uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }

// iq4_nl: qs word t holds the codes of values 4t..4t+3 (low nibbles) and 16+4t.. (high nibbles), so one
// lookup16 gives both words, as decode()'s loop does for its t-th word.
template <>
struct MmaFrag<fmt_iq4_nl> {
    using L = fmt_iq4_nl::L;
    static __device__ __forceinline__ Frag load(const uint8_t* b, int, int t, const uint32_t (&kv)[4], const Tab&) {
        Frag f;
        f.dw = ld_half(b + L::D);
        f.ls = 1;
        lookup16(ld_u32_a2(b + L::QS + 4 * t), kv, f.lo, f.hi);
        return f;
    }
};

// q8_0: the codes themselves, words t and 4 + t of the 32 qs bytes.
template <>
struct MmaFrag<fmt_q8_0> {
    using L = fmt_q8_0::L;
    static __device__ __forceinline__ Frag load(const uint8_t* b, int, int t, const uint32_t (&)[4], const Tab&) {
        Frag f;
        f.dw = ld_half(b + L::D);
        f.ls = 1;
        f.lo = (int)ld_u32_a2(b + L::QS + 4 * t);
        f.hi = (int)ld_u32_a2(b + L::QS + 16 + 4 * t);
        return f;
    }
};

// iq4_xs, chunk j of the super-block: qs word t of sub-block j holds the codes of its values 4t..4t+3 and
// 16+4t.. as iq4_nl's, so one lookup16 gives both words; ls = the 6-bit scale j - 32 and dw = d, read from
// the 8-byte head as decode() reads them (the block is 8-aligned: 136 = 8 x 17, rows 16-aligned).
template <>
struct MmaFrag<fmt_iq4_xs> {
    using L = fmt_iq4_xs::L;
    static __device__ __forceinline__ Frag load(const uint8_t* b, int j, int t, const uint32_t (&kv)[4], const Tab&) {
        Frag f;
        const uint2 head = ld_u64_any(b);  // d, scales_h (u16), scales_l[4]
        f.dw = fp16_bits_to_float((uint16_t)(head.x & 0xFFFFu));
        const uint32_t lo = (head.y >> (4 * j)) & 0x0Fu, hi = (head.x >> (16 + 2 * j)) & 0x03u;
        f.ls = (int)(lo | (hi << 4)) - 32;
        lookup16(*reinterpret_cast<const uint32_t*>(b + L::QS + 16 * j + 4 * t), kv, f.lo, f.hi);
        return f;
    }
};

// iq3_xxs and iq3_s, per lane (first measured in experiments/mmvq_mma5, which keeps the split formats' controls;
// H100, 131072 x 8192: 323.6 and 333.2 us against mmvq_new's 353.2 and 379.2). Word i (i = 2G + h) of a chunk
// is the table word of its own index byte i, with half h of group G's sign byte applied: lane t's words t and
// 4 + t are two lookups whatever the lanes share, and lanes t, t ^ 1 share only the sign byte's extraction (a
// pair would trade that for a shuffle: not built, PERF_NOTES v14). half_mask(s8, h) is decode()'s
// sign_mask_lo(s8) for h = 0 and sign_mask_hi(s8) for h = 1, the same expression with the lane's mask and
// multiplier (0x0F, 0x10204080 or 0xF0, 0x01020408: loop constants), one code for every lane.
__device__ __forceinline__ uint32_t half_mask(uint32_t s8, int h) {
    return prmt((s8 & (0x0Fu << (4 * h))) * (0x10204080u >> (4 * h)), 0u, 0xBA98u);
}

#ifndef MMA_DEFECT_SIGN_HALF
#define MMA_DEFECT_SIGN_HALF 0  // tests plant 1: every lane takes its sign nibble of the wrong half
#endif

// iq3_xxs, chunk j: index bytes at QS + 8j (byte i: word i), aux at SCALES_SIGNS + 4j (four 7-bit sign
// indexes, the scale in bits 28-31); dw = d / 4.
template <>
struct MmaFrag<fmt_iq3_xxs> {
    using L = fmt_iq3_xxs::L;
    static __device__ __forceinline__ int word(const uint8_t* b, int j, int i, uint32_t aux, const Tab& tab) {
        const uint32_t s8 = ksigns8((aux >> (7 * (i / 2))) & 0x7Fu);
        return apply_signs(tab.words[ld_u8(b + L::QS + 8 * j + i)], half_mask(s8, (i & 1) ^ MMA_DEFECT_SIGN_HALF));
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
        return apply_signs(tab.words[index], half_mask(s8, (i & 1) ^ MMA_DEFECT_SIGN_HALF));
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

// The lane-pair decode of a grid format whose 8-value group G gives Chunk words 2G and 2G + 1 as the two halves
// of one selector (word 2G + h = prmt(k0, k1, sel >> 16 h), iq1_group's and iq2_group's form): iq1_s and
// iq2_xxs in `new` (fmt_iq1_s_pair: fmt_iq1_s under another name, every trait inherited, so that
// mmvq_mma<fmt_iq1_s_pair, ...> runs this decoder; likewise fmt_iq2_xxs_pair; first measured in
// experiments/mmvq_lanepair, which keeps their controls; iq1_m, iq2_xs and iq2_s through mma_frag_split.cuh's
// split tags).
// Lane 4g + t supplies Chunk words t and 4 + t, so lane t needs half t & 1 of groups t / 2 and 2 + t / 2:
// lanes t and t ^ 1 need the same two groups. Each lane of the pair does one group's work and the pair swaps
// the results with one shuffle a row:
//   - lane t owns group G(t) = t / 2 + 2 (t & 1) (even t: the group of its word t; odd t: of its word 4 + t);
//     PairSel<F>::sel gives its selector from the same bytes, table word and sign work as the format's group
//     decode (iq1_s: nib(index(G)) | (neg ? 0x44444444 : 0), iq1_group's; the sign mask: prmt's sign
//     replication copies qh's bit 15 into every byte, and 0x44444444 & that is 0x44444444 exactly when the bit
//     is set);
//   - one __shfl_xor_sync(.., 1) gives it the partner's selector, sel(G(t ^ 1)): the other group it needs;
//   - word t is prmt(k0, k1, s) with s's low 16 bits = sel(t / 2)'s half t & 1 (the group decode's `sel >> 16 h`:
//     a default-mode prmt reads only the selector's low 16 bits, as iq1_group's own `lo` relies on), word
//     4 + t likewise from sel(2 + t / 2); a lane-constant prmt of (own, partner) makes both selectors.
// So lo, hi, dw and ls are decode()'s w[t], w[4 + t], dw and ls0 from the same bytes: this MmaFrag's contract.
// The shuffle needs the whole warp: mma_chunk runs under warp-uniform conditions only. PAIR = false is the
// same code with the partner's selector computed by the lane itself (no shuffle; experiments/mmvq_lanepair's
// control), and on the host (tests/iq_host/mma_emul.h) the exchange computes the partner's selector from the
// same block, which is what the partner lane (same row, same chunk) holds; LANEPAIR_XOR names the partner.
template <class F>
struct PairSel;  // head(b, j, f): dw and ls into f, returns the chunk's context word; sel(b, j, G, ctx, tab)

// iq1_s, chunk j: qh is the context (3 high index bits per group, the scale, the delta's sign).
template <>
struct PairSel<fmt_iq1_s> {
    using L = fmt_iq1_s::L;
    static __device__ __forceinline__ uint32_t head(const uint8_t* b, int j, Frag& f) {
        const uint32_t qh = ld_u16(b + L::QH + 2 * j);
        f.dw = ld_half(b) * 0.125f;
        f.ls = 2 * (int)((qh >> 12) & 7u) + 1;
        return qh;
    }
    // iq1_group's selector of group G of chunk j of block b.
    static __device__ __forceinline__ uint32_t sel(const uint8_t* b, int j, int G, uint32_t qh, const Tab& tab) {
        const uint32_t index = ld_u8(b + L::QS + 4 * j + G) | (((qh >> (3 * G)) & 7u) << 8);
        // iq1_group's `neg ? nib | 0x44444444 : nib`: prmt's sign replication copies qh's bit 15 (the top of
        // its byte 1) into every byte, a mask of the delta's sign (one PRMT where the select takes three).
        return tab.words[index] | (prmt(qh, 0u, 0x9999u) & 0x44444444u);
    }
};

// iq2_xxs, chunk j: the aux word is the context (four 7-bit sign indexes, the scale in bits 28-31). Group G's
// selector is iq2_sel<false>'s nib | ksign_nibbles of the grid byte G and sign index G (the lean decoder's form,
// decoders.cuh, which its tests hold to decode()'s); dw and ls are decode()'s (d * 0.125f, 2 (aux >> 28) + 1).
// First measured in experiments/mmvq_lanepair (issue 37: 268.5 us against mmvq_new's 304.3 at 131072 x 8192).
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

template <class F, bool PAIR>
struct GridPairFrag {
    using S = PairSel<F>;
    // Lane t's group: t / 2 for an even t (its word t), 2 + t / 2 for an odd t (its word 4 + t).
    static __host__ __device__ __forceinline__ int group(int t) { return t / 2 + 2 * (t & 1); }
    // The partner's selector: its lane's sel() of the same row and chunk.
    static __device__ __forceinline__ uint32_t partner(uint32_t own, const uint8_t* b, int j, int t, uint32_t ctx,
                                                       const Tab& tab) {
#ifdef __CUDA_ARCH__
        if constexpr (PAIR) return __shfl_xor_sync(0xFFFFFFFFu, own, LANEPAIR_XOR);
#endif
        (void)own;
        return S::sel(b, j, group(t ^ LANEPAIR_XOR), ctx, tab);
    }
    static __device__ __forceinline__ Frag load(const uint8_t* b, int j, int t, const uint32_t (&)[4], const Tab& tab) {
        Frag f;
        const uint32_t ctx = S::head(b, j, f);
        const uint32_t own = S::sel(b, j, group(t), ctx, tab);
        const uint32_t other = partner(own, b, j, t, ctx, tab);
        // Even t: own is group t / 2 (word t: its low half), other 2 + t / 2 (word 4 + t: low half).
        // Odd t: other is group t / 2 (word t: its high half, bytes 6-7), own 2 + t / 2 (high half, bytes 2-3).
        const bool odd = (t & 1) != 0;
        f.lo = (int)prmt(tab.k0, tab.k1, prmt(own, other, odd ? 0x7676u : 0x1010u));
        f.hi = (int)prmt(tab.k0, tab.k1, prmt(own, other, odd ? 0x3232u : 0x5454u));
        return f;
    }
};

struct fmt_iq1_s_pair : fmt_iq1_s {};
template <>
struct MmaFrag<fmt_iq1_s_pair> : GridPairFrag<fmt_iq1_s, true> {};
struct fmt_iq2_xxs_pair : fmt_iq2_xxs {};
template <>
struct MmaFrag<fmt_iq2_xxs_pair> : GridPairFrag<fmt_iq2_xxs, true> {};

// A warp's group: chunks c0 .. c0 + 7 (c0 a multiple of 8) of 16 rows, GB bytes of each row (8 blocks of
// a one-chunk format; one super-block of an 8-chunk one). Each row's share is copied as the 16-byte
// granules that cover it: the group starts HEAD(c0) bytes into its first granule (rows are 16-aligned and
// row_stride is a multiple of 16, so the head is the same for all 16 rows), a multiple of gcd(GB, 16),
// so U4 = ceil((16 - gcd + GB) / 16) granules cover it at any head. In the buffer row r's granules are at
// ROW r and its group at ROW r + HEAD(c0). Where GB is a multiple of 16 (iq4_nl, q8_0) the head is
// the constant 0 and U4 = GB / 16: the buffer layout, loads and reads are those of the aligned-only kernel.
__host__ __device__ constexpr int gcd16(int n) { return n % 16 == 0 ? 16 : n % 8 == 0 ? 8 : n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : 1; }
template <class F>
struct MmaGroup {
    static_assert(F::CHUNKS == 1 || F::CHUNKS == 8, "a group of 8 chunks: 8 blocks or one super-block");
    static constexpr int BYTES = 8 / F::CHUNKS * F::BYTES;  // a row's group: 8 chunks
    static constexpr bool ALIGNED = BYTES % 16 == 0;
    static constexpr int U4 = (16 - gcd16(BYTES) + BYTES + 15) / 16;  // 16-byte granules of a row's group
    // Granules per buffer row: odd, so that rows g = 0..7 start 4 STRIDE words apart in distinct banks
    // (4 STRIDE g mod 32 = 4 (STRIDE mod 8) g); U4 where it is odd (every format but iq1_s: 4 -> 5).
    static constexpr int STRIDE = U4 | 1;
    static constexpr int ROW = 16 * STRIDE;                           // buffer bytes per row
    static constexpr int WORDS = 16 * STRIDE;                         // uint4 of a group's buffer
    static constexpr int PER_LANE = (16 * U4 + 31) / 32;              // 16-byte loads per lane for 16 rows
    // The buffer slot of a warp's load k (granule k % U4 of row k / U4).
    static __host__ __device__ __forceinline__ int slot(int k) {
        if constexpr (STRIDE == U4) return k;
        else return k / U4 * STRIDE + k % U4;
    }
    // Byte offset of group c0 in a row, and where in its first granule it starts.
    static __host__ __device__ __forceinline__ int start(int c0) { return c0 / F::CHUNKS * F::BYTES; }
    static __host__ __device__ __forceinline__ int head(int c0) {
        if constexpr (ALIGNED) return 0;
        else return start(c0) & 15;
    }
    // Row offset of granule u of group c0 (16-aligned).
    static __host__ __device__ __forceinline__ int granule(int c0, int u) { return start(c0) - head(c0) + 16 * u; }
};
static_assert(MmaGroup<fmt_iq4_nl>::U4 == 9 && MmaGroup<fmt_q8_0>::U4 == 17, "aligned groups: whole rows of granules");
// iq2_xxs's and iq1_s's per-lane MmaFrags are experiments/mmvq_mma's (their lane pairs are fmt_*_pair above),
// but their groups' sizes stay checked here:
// the check instantiates MmaGroup<F>, whose constants NVRTC emits into every module that includes this
// header, so dropping it would move the built-in kernels' global data (their cubins would differ).
static_assert(MmaGroup<fmt_iq4_xs>::U4 == 9 && MmaGroup<fmt_iq2_xxs>::U4 == 5 && MmaGroup<fmt_iq1_s>::U4 == 4,
              "super-block groups: head up to 8 (iq4_xs) or 14 bytes");

// The 4 table words a fragment decoder reads (iq4_nl's kvalues; unused by q8_0), from `words` (global or
// shared memory: the same words).
template <class F>
__device__ __forceinline__ void frag_table(const uint32_t* words, uint32_t (&kv)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) kv[i] = F::TABLE_WORDS >= 4 ? words[i] : 0u;
}

}  // namespace siq
