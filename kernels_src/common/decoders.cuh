// decoders.cuh: the decoders mmvq_new may run in place of a format's own (strata_bench/families/mmvq_decoders.py
// names them; a launch config picks one). mmvq_old always runs the format's own decode.
//
// ARITHMETIC CONTRACT: each gives exactly its format's Chunk integers (iq_decode.cuh: w, ls0, ls1, dw), or,
// for sign_masked<F>, the same chunk with the signs split off as byte masks, whose dp4a chains
// (signed_chain) end at the same integers. So every output keeps its bits; only the instruction mix
// changes (fewer on the integer-ALU pipe, the n = 1 loops' busiest). tests/families/test_mmvq_decoders.py
// checks every decoder against its format on every code word, on the CPU; parity checks the kernels.
#pragma once
#include "common/iq_decode.cuh"

namespace siq {

// A format decoded with its signs as masks (Chunk::m; the format's decode_masked): the same integers
// reach each dp4a chain's end (signed_chain), with fewer integer-ALU instructions a chunk than decode.
// SPLIT: the chains in halves (signed_chain), a launch choice like R and U.
template <class F, bool SPLIT = false>
struct sign_masked : F {
    static constexpr bool SIGN_MASKS = true;
    static constexpr bool SPLIT_CHAINS = SPLIT;
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        F::decode_masked(b, j, t, c);
    }
};

// a | (b & c) as one LOP3: written as two C operations, ptxas does not always fuse it with its neighbours.
__device__ __forceinline__ uint32_t or_and(uint32_t a, uint32_t b, uint32_t c) {
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xF8;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
#else
    return a | (b & c);
#endif
}

// ---- replicated tables: conflict-free lookups (sign_masked_rep) ------------------------------------
// The table staged as N interleaved copies (copy k of word i at i * N + k: stage_table), and lane l reads
// copy l % N. A warp's 32 random lookups then touch at most 32 / N lanes per bank (N = 32: bank = lane,
// one wavefront a lookup; 16: at most 2; 8: at most 4), where one copy met ~3.1-way conflicts (ncu,
// results/logs/20261201T163046Z). The same words, so the same integers. The copy's offset is folded into
// the index arithmetic the lookup does anyway: byte_word's shift and AND become a shift and one LOP3
// (AND the scaled byte, OR the lane's offset), word's index scaling one LEA with the offset as addend;
// the table base stays the static shared array's immediate.
template <int N>
struct TableRep {
    static_assert(N == 2 || N == 4 || N == 8 || N == 16 || N == 32, "copies: a power of two dividing 32");
    static constexpr int SCALE = 2 + (N >= 2) + (N >= 4) + (N >= 8) + (N >= 16) + (N >= 32);  // log2(4 N)
    // The lane's copy as a byte offset (threadIdx is read once: the compiler keeps it in a register).
    static __device__ __forceinline__ uint32_t lane_bytes() { return (threadIdx.x % N) * 4u; }
    static __device__ __forceinline__ uint32_t at(const Tab& t, uint32_t bytes) {
        return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(t.words) + bytes);
    }
    static __device__ __forceinline__ uint32_t word(const Tab& t, uint32_t i) { return at(t, (i << SCALE) + lane_bytes()); }
    static __device__ __forceinline__ uint32_t byte_word(const Tab& t, uint32_t x, int s) {
        const uint32_t scaled = s >= SCALE ? x >> (s - SCALE) : x << (SCALE - s);  // byte s/8 at bit SCALE
        return at(t, or_and(lane_bytes(), scaled, 0xFFu << SCALE));
    }
};

// sign_masked<F, SPLIT> reading its grid from N copies (TableRep): the same Chunk, the same dp4a chains.
template <class F, bool SPLIT, int N>
struct sign_masked_rep : sign_masked<F, SPLIT> {
    static constexpr int TABLE_COPIES = N;  // stage_table stages N copies, SharedTab sizes them
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        F::template decode_masked<TableRep<N>>(b, j, t, c);
    }
};

// ---- lean IQ2 decoders (fmt_iq2_xxs_lean, fmt_iq2_xs_lean: the same Chunk as the format's decode) ------
// Fewer integer-ALU instructions a chunk (the n = 1 loops' busiest pipe): the sign selector's masks and
// ORs as two explicit LOP3s (ptxas emits three), the code words' funnel shift without the mask on its
// amount, and (iq2_xxs) each grid byte's table offset as PRMT + IMAD.SHL instead of SHF + LOP3. Moving
// shifts to IMAD.HI instead was measured slower (docs/PERF_NOTES.md, v5).

// ld_words_a2 without the mask on the funnel shift's amount: __funnelshift_r uses only its low 5 bits,
// and 8 * address mod 32 is already 0 or 16 at a 2-byte aligned address (one LOP3 fewer a load).
template <int N>
__device__ __forceinline__ void ld_words_a2w(const uint8_t* p, uint32_t (&out)[N]) {
    const uint32_t* a = reinterpret_cast<const uint32_t*>(reinterpret_cast<unsigned long long>(p) & ~(unsigned long long)3);
    const uint32_t shift = (uint32_t)reinterpret_cast<unsigned long long>(p) * 8u;
    uint32_t lo = __ldg(a);
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const uint32_t hi = __ldg(a + i + 1);
        out[i] = __funnelshift_r(lo, hi, shift);
        lo = hi;
    }
}

// nib | ksign_nibbles(t & 0x7F) for t holding the 7-bit sign index in its low bits (anything above when
// EXACT is false): ksign_nibbles' own masks, as two LOP3s.
template <bool EXACT>
__device__ __forceinline__ uint32_t iq2_sel(uint32_t t, uint32_t nib) {
    const uint32_t odd = ((t & 0x2Au) * 0x820820u) + ((uint32_t)__popc(EXACT ? t : t & 0x7Fu) << 30);
    const uint32_t even = (t & 0x55u) * 0x104104u;
    return or_and(or_and(nib, even, 0x04040404u), odd, 0x40404040u);
}

// The table word of grid byte G of idx: its byte offset as PRMT (byte G, zero-extended) times 4.
template <int G>
__device__ __forceinline__ uint32_t nib_of_byte(const Tab& t, uint32_t idx) {
    const uint32_t off = prmt(idx, 0u, 0x4440u + G) * 4u;
    return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(t.words) + off);
}

struct fmt_iq2_xxs_lean : fmt_iq2_xxs {
    template <int G>
    static __device__ __forceinline__ void group(const Tab& t, uint32_t idx, uint32_t aux, Chunk& c) {
        // iq2_sel already ORs in the grid word: iq2_group gets it as the sign bits, with no nib.
        iq2_group(t, 0u, iq2_sel<false>(aux >> (7 * G), nib_of_byte<G>(t, idx)), c.w[2 * G], c.w[2 * G + 1]);
    }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        uint32_t f[2];  // four grid indexes; four 7-bit sign indexes with the scale in bits 28-31
        ld_words_a2w(b + L::QS + 8 * j, f);
        const uint32_t idx = f[0], aux = f[1];
        c.dw = ld_half(b) * 0.125f;
        c.ls0 = c.ls1 = 2 * (int)(aux >> 28) + 1;
        group<0>(t, idx, aux, c);
        group<1>(t, idx, aux, c);
        group<2>(t, idx, aux, c);
        group<3>(t, idx, aux, c);
    }
};

struct fmt_iq2_xs_lean : fmt_iq2_xs {
    template <int G>
    static __device__ __forceinline__ void group(const Tab& t, uint32_t q, Chunk& c) {
        const uint32_t v = q >> (16 * (G & 1));  // u16 entry G in the low bits (junk above for G even)
        const uint32_t nib = t.words[v & 0x1FFu];
        // The sign index shifted from q itself: for G odd nothing is left above it (no mask for the popc).
        iq2_group(t, 0u, iq2_sel<(G & 1) == 1>(q >> (9 + 16 * (G & 1)), nib), c.w[2 * G], c.w[2 * G + 1]);
    }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        uint32_t f[2];  // four u16 entries: 9-bit grid index, 7-bit sign index
        ld_words_a2w(b + L::QS + 8 * j, f);
        const uint32_t sc = ld_u8(b + L::SCALES + j);
        c.dw = ld_half(b) * 0.125f;
        c.ls0 = 2 * (int)(sc & 0x0Fu) + 1;
        c.ls1 = 2 * (int)(sc >> 4) + 1;
        group<0>(t, f[0], c);
        group<1>(t, f[0], c);
        group<2>(t, f[1], c);
        group<3>(t, f[1], c);
    }
};

}  // namespace siq
