// iq_decode.cuh: the decode contract every i-quant kernel here shares (mmvq and grouped, old and new).
//
// ARITHMETIC CONTRACT (see docs/ARITHMETIC.md for the proofs and the tolerance derivations)
//   A "chunk" is 32 consecutive weights of a row, aligned with one q8_1 activation block. Each format's
//   decode() turns a chunk into
//     w[8]      32 small exact integers, 4 per int32 word (int8 lanes, ready for __dp4a),
//     ls0, ls1  integer sub-scales of the first and second 16 values (equal where the format has one
//               scale per 32 values),
//     dw        a float with  value[i] = dw * ls_half(i) * w[i]  EXACTLY (in real numbers):
//       q8_0     dw = d,    ls = 1,          w = q
//       q2_0     dw = d,    ls = 1,          w = 2q - 3                 (two chunks per 64-value block)
//       iq4_nl   dw = d,    ls = 1,          w = kvalues[code]
//       iq4_xs   dw = d,    ls = scale - 32, w = kvalues[code]
//       iq2_xxs  dw = d/8,  ls = 2s + 1,     w = +-grid byte
//       iq2_xs   dw = d/8,  ls = 2s + 1 per 16 values, w = +-grid byte
//       iq2_s    dw = d/8,  ls = 2s + 1 per 16 values, w = +-grid byte
//       iq3_xxs  dw = d/4,  ls = 2s + 1,     w = +-grid byte
//       iq3_s    dw = d,    ls = 2s + 1,     w = +-grid byte
//       iq1_s    dw = d/8,  ls = 2s + 1,     w = 8*g +- 1 (g in {-1,0,1}, the delta +-1/8 folded in)
//       iq1_m    dw = d/8,  ls = 2s + 1 per 16 values, w = 8*g +- 1 (delta per 8 values)
//   d is the block's fp16 scale; d/8 and d/4 are exact in float32.
//   A sign-mask decoder (F::SIGN_MASKS; new kernels only) gives the same chunk with the signs split off:
//   w = |grid byte| and m = 0xFF at the negated bytes, so the signed weight is w where m is 0, else -w.
//   The dot of a chunk with a q8_1 block (codes q, fp16 scale d_act) is
//     isum = ls0 * sum_{i<16} w[i] q[i] + ls1 * sum_{i>=16} w[i] q[i]      (int32, exact:
//            |isum| <= 32 * 32 * 127 * 127 < 2^24 for the widest format, iq4_xs, so float(isum) is exact)
//     acc  = fmaf(dw * d_act, (float)isum, acc)
//   With sign masks the same integer is summed as sum w q - 2 * sum (w & m) q (every w byte is a
//   magnitude below 128, so w & m is a valid int8 lane; both sums are exact integers).
//   dw * d_act is exact (two 11-bit significands, no underflow: both >= 2^-27), and fmaf rounds once,
//   so every chunk's term is exact and the only roundings are the additions into acc. The integer
//   result does not depend on how it is computed (old kernels read tables from global memory, new ones
//   from shared memory; both give the same integers), so two kernels that feed the same chunks in the
//   same order into acc, and reduce lanes with the same tree, give the same bits.
#pragma once
#include "common/strata_common.cuh"
#include "generated/iq_tables.cuh"
#include "formats/q8_0.cuh"
#include "formats/q2_0.cuh"
#include "formats/iq4_nl.cuh"
#include "formats/iq4_xs.cuh"
#include "formats/iq2_xxs.cuh"
#include "formats/iq2_xs.cuh"
#include "formats/iq2_s.cuh"
#include "formats/iq3_xxs.cuh"
#include "formats/iq3_s.cuh"
#include "formats/iq1_s.cuh"
#include "formats/iq1_m.cuh"

namespace siq {

struct Chunk {
    int w[8];       // 32 int8 weights: words 0-3 = values 0-15, words 4-7 = values 16-31
    uint32_t m[8];  // where F::SIGN_MASKS: w holds magnitudes and m is 0xFF at each negated byte (else unused)
    int ls0;        // integer scale of values 0-15
    int ls1;        // integer scale of values 16-31
    float dw;       // float factor, exact
};

// Where decode() finds its table: `words` (global memory in old kernels, shared memory in new ones; the
// same words) and two byte-table constants (IQ2: grid magnitudes and their negations; IQ1: 8g+1 and
// 8g-1). New kernels read the constants from shared memory once so that they stay in registers rather
// than being re-materialized at every use.
struct Tab {
    const uint32_t* words;
    uint32_t k0;
    uint32_t k1;
};

// How a decode reads its table words: the format's own decode indexes t.words directly; decode_masked
// takes the reading as a policy (Look), so that a decoder of the new kernels can read an interleaved
// table of copies instead (decoders.cuh, TableRep). Plain is the direct read, the same expression as
// before, so the default forms compile to the same code.
struct PlainLookup {
    // The word at index i.
    static __device__ __forceinline__ uint32_t word(const Tab& t, uint32_t i) { return t.words[i]; }
    // The word at the index held in byte (x >> s) & 0xFF.
    static __device__ __forceinline__ uint32_t byte_word(const Tab& t, uint32_t x, int s) { return t.words[(x >> s) & 0xFFu]; }
};

// ---- loads: blocks start at 2-byte aligned addresses (every block size is even) ---------------------
__device__ __forceinline__ uint32_t ld_u8(const uint8_t* p) { return *p; }
__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
// Four bytes at a 2-byte aligned address.
__device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) { return ld_u16(p) | (ld_u16(p + 2) << 16); }
__device__ __forceinline__ float ld_half(const uint8_t* p) { return fp16_bits_to_float((uint16_t)ld_u16(p)); }

// N consecutive 4-byte values at a 2-byte aligned address, from N+1 aligned 32-bit loads and N funnel
// shifts: fewer, wider loads than 2N 16-bit ones (a warp's load instruction costs about one L1
// wavefront per cache line it touches, however few bytes it takes from each). The last aligned word
// may lie up to 2 bytes past the values: device buffers keep 16 readable bytes after the last row.
template <int N>
__device__ __forceinline__ void ld_words_a2(const uint8_t* p, uint32_t (&out)[N]) {
    const uint32_t* a = reinterpret_cast<const uint32_t*>(reinterpret_cast<unsigned long long>(p) & ~(unsigned long long)3);
    const uint32_t shift = (uint32_t)(reinterpret_cast<unsigned long long>(p) & 2u) * 8u;
    uint32_t lo = __ldg(a);  // weights are global and read-only: the non-coherent path, as LDG
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const uint32_t hi = __ldg(a + i + 1);
        out[i] = __funnelshift_r(lo, hi, shift);
        lo = hi;
    }
}

// 8 bytes at an 8-byte aligned address (blocks of 56 and 136 bytes are 8-aligned: rows start 16-aligned).
__device__ __forceinline__ uint2 ld_u64_a8(const uint8_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }

// The 16-byte aligned window around a 2-byte aligned block: NW uint4 loads (the fewest L1 wavefronts
// for a warp whose lanes read blocks at a stride that is not a multiple of 16), rotated by whole words
// so that field(f) returns the 4 bytes at block offset f with one funnel shift. The rotation amount
// (block address mod 16) is the same at every step of a lane's walk (STEP is a multiple of 16 where
// this is used), so the selects cost the same every step but never index registers dynamically.
template <int NW>
struct Window {
    uint32_t u[4 * NW - 2];  // window words from the block's word onwards
    uint32_t shift2;         // 16 when the block starts 2 bytes into a word, else 0

    __device__ __forceinline__ explicit Window(const uint8_t* block) {
        const unsigned long long addr = reinterpret_cast<unsigned long long>(block);
        const uint4* base = reinterpret_cast<const uint4*>(addr & ~(unsigned long long)15);
        uint32_t w[4 * NW];
#pragma unroll
        for (int i = 0; i < NW; ++i) {
            const uint4 v = __ldg(base + i);
            w[4 * i] = v.x; w[4 * i + 1] = v.y; w[4 * i + 2] = v.z; w[4 * i + 3] = v.w;
        }
        const uint32_t words = (uint32_t)(addr >> 2) & 3u;  // whole words to skip
        uint32_t v[4 * NW - 1];
#pragma unroll
        for (int i = 0; i < 4 * NW - 1; ++i) v[i] = (words & 2u) && i + 2 < 4 * NW ? w[i + 2] : w[i];
#pragma unroll
        for (int i = 0; i < 4 * NW - 2; ++i) u[i] = (words & 1u) ? v[i + 1] : v[i];
        shift2 = (uint32_t)(addr & 2u) * 8u;
    }
    // 4 bytes at block offset F (even, F + 4 <= block bytes): a shift of 32 (clamped) selects u[F/4+1].
    template <int F>
    __device__ __forceinline__ uint32_t field() const {
        static_assert(F % 2 == 0 && F / 4 + 1 < 4 * NW - 2, "field outside the window");
        return __funnelshift_rc(u[F / 4], u[F / 4 + 1], 8u * (F & 2) + shift2);
    }
};

// ---- byte tricks ------------------------------------------------------------------------------------
// PTX prmt in its default mode: selector nibble bits 2:0 pick one of the 8 bytes of (a, b); bit 3 set
// replicates that byte's sign bit. (__byte_perm ignores bit 3, so the sign-replicate needs asm.)
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
#else  // the host emulation of tests/iq_host compiles this header with a C++ compiler
    const uint64_t src = ((uint64_t)b << 32) | a;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t s = (sel >> (4 * i)) & 0xFu;
        uint32_t byte = (uint32_t)(src >> (8 * (s & 7u))) & 0xFFu;
        if (s & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
        r |= byte << (8 * i);
    }
    return r;
#endif
}

// Byte k of x, zero-extended: one PRMT (the zero bytes come from b = 0), where (x >> 8k) & 0xFF takes a
// shift and an AND on the integer-ALU pipe (ptxas then scales a lookup index with IMAD, off that pipe).
__device__ __forceinline__ uint32_t byte_at(uint32_t x, int k) { return prmt(x, 0u, 0x4440u | (uint32_t)k); }

// ggml's 7-bit sign index -> 8 sign bits: bit 7 makes the popcount even (tests/kernels/test_tables.py checks
// this formula against gguf's ksigns table).
__device__ __forceinline__ uint32_t ksigns8(uint32_t k7) { return k7 | ((__popc(k7) & 1u) << 7); }

// Byte masks (0xFF where the sign bit is set) for sign bits 0-3 and 4-7 of s8: the multiply moves bit k
// of the nibble to bit 8k+7 (the four copies do not overlap), then prmt replicates each byte's top bit.
__device__ __forceinline__ uint32_t sign_mask_lo(uint32_t s8) { return prmt((s8 & 0x0Fu) * 0x10204080u, 0u, 0xBA98u); }
__device__ __forceinline__ uint32_t sign_mask_hi(uint32_t s8) { return prmt((s8 & 0xF0u) * 0x01020408u, 0u, 0xBA98u); }

// The same two masks of ksigns8(k7), straight from the 7-bit index with fewer ALU instructions. Bit b
// of x (b < 7) times 0x10204080 lands at b + 7 + 7j for j < 4: distinct places (no carries), and b = j is
// the only one at a byte top 8j + 7, so bits 0-3 of k7 need no AND. For the high nibble, popc(k7) * 128
// + k7 has the parity at bit 7 (the 8th sign) and junk only at bits 8-9; shifted down by 4, bits 0-3 are
// signs 4-7 and the junk bits 4-5 land at 11 + 7j and 12 + 7j, never a byte top.
// tests/kernels/test_tables.py checks both against sign_mask_lo/hi(ksigns8(k7)) for all 128 indexes.
__device__ __forceinline__ uint32_t ksign_mask_lo(uint32_t k7) { return prmt(k7 * 0x10204080u, 0u, 0xBA98u); }
__device__ __forceinline__ uint32_t ksign_mask_hi(uint32_t k7) {
    const uint32_t s8 = (uint32_t)__popc(k7) * 128u + k7;
    return prmt((s8 >> 4) * 0x10204080u, 0u, 0xBA98u);
}

// Sign bit i of s8 (i < 8) -> bit 4i+2: bit 2 of selector nibble i, which moves a prmt lookup from the
// positive table word to the negative one. One multiply spreads the even bits: bit i of
// (s8 & 0x55) * 0x104104 lands at 4i+2 and the other copies at distinct places, except three pairs
// that collide at 8, 14 and 20 and carry into 9, 15 and 21, none of which is kept. Likewise the odd
// bits with 0x820820 (collisions at 12, 18, 24 carry into 13, 19, 25). tests/kernels/test_tables.py checks
// both formulas exhaustively against a plain bit loop.
__device__ __forceinline__ uint32_t sign_nibbles(uint32_t s8) {
    return (((s8 & 0x55u) * 0x104104u) & 0x04040404u) | (((s8 & 0xAAu) * 0x820820u) & 0x40404040u);
}

// ggml's 7-bit sign index -> the same selector bits; the 8th sign (the index's parity, as in ksigns)
// goes to bit 30, where the odd spread has nothing.
__device__ __forceinline__ uint32_t ksign_nibbles(uint32_t k7) {
    const uint32_t odd = ((k7 & 0x2Au) * 0x820820u) | ((uint32_t)__popc(k7) << 30);
    return (((k7 & 0x55u) * 0x104104u) & 0x04040404u) | (odd & 0x40404040u);
}

// IQ2 group of 8: nibble codes (0..2) and the sign selector bits -> two words of signed grid bytes.
// t.k0 = STRATA_IQ2_GRID_MAP, t.k1 = STRATA_IQ2_GRID_MAP_NEG.
__device__ __forceinline__ void iq2_group(const Tab& t, uint32_t nib, uint32_t signs, int& lo, int& hi) {
    const uint32_t sel = nib | signs;
    lo = (int)prmt(t.k0, t.k1, sel);
    hi = (int)prmt(t.k0, t.k1, sel >> 16);
}

// Negate the bytes of g selected by mask m. Needs every byte of g non-zero (true of every grid
// magnitude here): then 0x01010100 - g is the bytewise negation (no borrow crosses a byte).
__device__ __forceinline__ int apply_signs(uint32_t g, uint32_t m) {
    const uint32_t ng = 0x01010100u - g;
    return (int)((g & ~m) | (ng & m));
}

// 16-entry signed lookup (iq4 kvalues) of the 8 nibbles of x: byte j of x holds code(value j) in its
// low nibble and code(value j+16) in its high nibble. Returns values 0-3 in lo, 16-19 in hi.
// kv[4] are the 16 table bytes as 4 words. prmt can pick among 8 bytes, so each half of the table is
// looked up with the low 3 bits and the code's bit 3 chooses the half.
__device__ __forceinline__ void lookup16(uint32_t x, const uint32_t kv[4], int& lo, int& hi) {
    const uint32_t sel = x & 0x77777777u;
    const uint32_t half = 0x32103210u | ((x & 0x88888888u) >> 1);  // nibble i: i%4, +4 if code >= 8
    const uint32_t t0 = prmt(prmt(kv[0], kv[1], sel), prmt(kv[2], kv[3], sel), half);
    const uint32_t t1 = prmt(prmt(kv[0], kv[1], sel >> 16), prmt(kv[2], kv[3], sel >> 16), half >> 16);
    // t0 = values (0, 16, 1, 17), t1 = (2, 18, 3, 19): gather the even and the odd bytes.
    lo = (int)prmt(t0, t1, 0x6420u);
    hi = (int)prmt(t0, t1, 0x7531u);
}

// ---- integer dot and the one float step (identical in every kernel) ---------------------------------
// The dp4a chain over the chunk's words B .. E-1, started at `init`. Formats with one scale per chunk
// (ONE_SCALE) use one chain over all 8 words and one multiply (the integer is exact however it is summed:
// |partial sums| < 2^24 < 2^31, so the value is the same); the others one chain per 16 values.
template <int B, int E>
__device__ __forceinline__ int dp4a_chain(const Chunk& c, const int q[8], int init) {
    int s = init;
#pragma unroll
    for (int i = B; i < E; ++i) s = __dp4a(c.w[i], q[i], s);
    return s;
}

// A sign-mask chunk's negated part over words B .. E-1: sum (w & m) q (every w byte is a magnitude below
// 128, so w & m is a valid int8 lane).
template <int B, int E>
__device__ __forceinline__ int masked_sum(const Chunk& c, const int q[8]) {
    int n = 0;
#pragma unroll
    for (int i = B; i < E; ++i) n = __dp4a(c.w[i] & (int)c.m[i], q[i], n);
    return n;
}

// init + sum (signed w) q over words B .. E-1, as the format's Chunk form asks: one dp4a chain; for a
// sign-mask decoder the chain started at init - 2 * masked_sum (one dp4a and one LOP3 a word in place
// of negating the weight bytes, which takes two integer-ALU instructions, the n = 1 kernels' busiest
// pipe), or with SPLIT_CHAINS both sums in two halves, four independent chains of half the length.
// Every form ends at the same integer.
template <class F, int B, int E>
__device__ __forceinline__ int signed_chain(const Chunk& c, const int q[8], int init) {
    if constexpr (F::SIGN_MASKS) {
        if constexpr (F::SPLIT_CHAINS) {
            constexpr int M = (B + E) / 2;
            const int s = dp4a_chain<B, M>(c, q, init) + dp4a_chain<M, E>(c, q, 0);
            return s - 2 * (masked_sum<B, M>(c, q) + masked_sum<M, E>(c, q));
        } else {
            return dp4a_chain<B, E>(c, q, init - 2 * masked_sum<B, E>(c, q));
        }
    } else {
        return dp4a_chain<B, E>(c, q, init);
    }
}

template <class F>
__device__ __forceinline__ int chunk_isum(const Chunk& c, const int q[8]) {
    if (F::ONE_SCALE) return c.ls0 * signed_chain<F, 0, 8>(c, q, 0);
    const int s0 = signed_chain<F, 0, 4>(c, q, 0), s1 = signed_chain<F, 4, 8>(c, q, 0);
    return c.ls0 * s0 + c.ls1 * s1;
}

// The same isum, as the float (float)chunk_isum<F>(c, q) gives, without the int -> float conversion
// (a quarter-rate pipe) or the integer scale multiply (the dp4a's pipe). Each dp4a chain starts from
// the bits of 1.5 * 2^23, so it ends at the bits of the float 1.5 * 2^23 + s (|s| <= 32 * 127 * 128 <
// 2^22: the sum stays inside that binade, where the float spacing is 1). Then
// fmaf(1.5 * 2^23 + s, ls, -1.5 * 2^23 * ls) = s * ls exactly: -1.5 * 2^23 * ls is exact (ls has at most
// 6 bits), the fma rounds once, and s * ls is an integer below 2^24, so the rounding changes nothing.
// Two scales: both products are exact integers and so is their sum (|isum| < 2^24). A float equal to
// the int's conversion, so chunk_fma's inputs, and its bits, are unchanged. With sign masks the chains
// start lower or sum in parts (signed_chain) and end at the same bits: it is integer arithmetic, far
// from overflow, and only the end is read as a float (tests/families/test_dequant.py
// checks it on the CPU at the extreme codes).
template <class F>
__device__ __forceinline__ float chunk_isum_f(const Chunk& c, const int q[8]) {
    constexpr int MAGIC = 0x4B400000;  // the bits of 12582912.0f = 1.5 * 2^23
    constexpr float BIAS = 12582912.0f;
    const float ls0 = (float)c.ls0, ls1 = (float)c.ls1;
    if (F::ONE_SCALE) return fmaf(__int_as_float(signed_chain<F, 0, 8>(c, q, MAGIC)), ls0, -BIAS * ls0);
    const int s0 = signed_chain<F, 0, 4>(c, q, MAGIC), s1 = signed_chain<F, 4, 8>(c, q, MAGIC);
    return fmaf(__int_as_float(s0), ls0, -BIAS * ls0) + fmaf(__int_as_float(s1), ls1, -BIAS * ls1);
}

__device__ __forceinline__ float chunk_fma_f(const Chunk& c, float d_act, float isum, float acc) {
    return fmaf(c.dw * d_act, isum, acc);
}

__device__ __forceinline__ float chunk_fma(const Chunk& c, float d_act, int isum, float acc) {
    return fmaf(c.dw * d_act, (float)isum, acc);
}

// One q8_1 block as 8 code words and its float scale (block_q8_1 is 4-byte aligned: qs at offset 4).
__device__ __forceinline__ float load_q8_1(const block_q8_1* xb, int q[8]) {
    const int* qs = reinterpret_cast<const int*>(xb->qs);
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = qs[i];
    return __half2float(xb->d);
}

// ---- formats ----------------------------------------------------------------------------------------
// Each format: QK values and BYTES bytes per block, CHUNKS = QK/32, TABLE_WORDS (0 = no table) and
// table() (its generated global table), decode(block, j, tab, out) for chunk j of the block, where tab
// points at the table in global or shared memory (same words either way).

struct fmt_q8_0 {
    using L = layout::q8_0;  // the block layout (formats/q8_0.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 1, TABLE_WORDS = STRATA_Q8_0_TABLE_WORDS;
    static constexpr bool ONE_SCALE = true;  // ls0 == ls1 always
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = 0, K1 = 0;
    static __device__ __forceinline__ const uint32_t* table() { return nullptr; }
    static __device__ __forceinline__ void decode(const uint8_t* b, int, const Tab&, Chunk& c) {
        const Window<3> win(b);  // 34 bytes from any even offset fit in 48
        c.dw = fp16_bits_to_float((uint16_t)(win.field<L::D>() & 0xFFFFu));
        c.ls0 = c.ls1 = 1;
        c.w[0] = (int)win.field<L::QS>(); c.w[1] = (int)win.field<L::QS + 4>(); c.w[2] = (int)win.field<L::QS + 8>();
        c.w[3] = (int)win.field<L::QS + 12>(); c.w[4] = (int)win.field<L::QS + 16>(); c.w[5] = (int)win.field<L::QS + 20>();
        c.w[6] = (int)win.field<L::QS + 24>(); c.w[7] = (int)win.field<L::QS + 28>();
    }
};

struct fmt_q2_0 {
    using L = layout::q2_0;  // the block layout (formats/q2_0.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 2, TABLE_WORDS = STRATA_Q2_0_TABLE_WORDS;
    static constexpr bool ONE_SCALE = true;  // ls0 == ls1 always
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = 0, K1 = 0;
    static __device__ __forceinline__ const uint32_t* table() { return nullptr; }
    // codes c (bytes 0..3) -> 2c - 3 as int8: 2c + 0x7D never carries, and xor 0x80 subtracts 0x80.
    static __device__ __forceinline__ int level(uint32_t c) { return (int)(((c << 1) + 0x7D7D7D7Du) ^ 0x80808080u); }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab&, Chunk& c) {
        // (Window<2> would take 2 loads instead of 5 but costs more instructions than q2_0 can spare.)
        c.dw = ld_half(b);
        c.ls0 = c.ls1 = 1;
        uint32_t qs[4];
        ld_words_a2(b + L::QS, qs);
        // value e of chunk j (element 32j+e): byte e%16, shift 4j (e<16) or 4j+2 (e>=16)
#pragma unroll
        for (int t = 0; t < 4; ++t) {
            c.w[t] = level((qs[t] >> (4 * j)) & 0x03030303u);
            c.w[4 + t] = level((qs[t] >> (4 * j + 2)) & 0x03030303u);
        }
    }
};

struct fmt_iq4_nl {
    using L = layout::iq4_nl;  // the block layout (formats/iq4_nl.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 1, TABLE_WORDS = STRATA_IQ4_NL_TABLE_WORDS;
    static constexpr bool ONE_SCALE = true;  // ls0 == ls1 always
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = 0, K1 = 0;
    static __device__ __forceinline__ const uint32_t* table() { return kvalues_iq4nl_u32; }
    static __device__ __forceinline__ void decode(const uint8_t* b, int, const Tab& t, Chunk& c) {
        const uint32_t kv[4] = {t.words[0], t.words[1], t.words[2], t.words[3]};
        const Window<2> win(b);  // 18 bytes from any even offset fit in 32
        c.dw = fp16_bits_to_float((uint16_t)(win.field<L::D>() & 0xFFFFu));
        c.ls0 = c.ls1 = 1;
        const uint32_t qs[4] = {win.field<L::QS>(), win.field<L::QS + 4>(), win.field<L::QS + 8>(), win.field<L::QS + 12>()};
#pragma unroll
        for (int t = 0; t < 4; ++t) lookup16(qs[t], kv, c.w[t], c.w[4 + t]);
    }
};
static_assert(fmt_iq4_nl::TABLE_WORDS == STRATA_KVALUES_IQ4NL_U32_SIZE, "iq4_nl: staged words != generated table");

struct fmt_iq4_xs {
    using L = layout::iq4_xs;  // the block layout (formats/iq4_xs.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 8, TABLE_WORDS = STRATA_IQ4_XS_TABLE_WORDS;
    static constexpr bool ONE_SCALE = true;  // ls0 == ls1 always
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = 0, K1 = 0;
    static __device__ __forceinline__ const uint32_t* table() { return kvalues_iq4nl_u32; }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        const uint32_t kv[4] = {t.words[0], t.words[1], t.words[2], t.words[3]};
        const uint2 head = ld_u64_a8(b);  // d, scales_h (u16), scales_l[4]
        c.dw = fp16_bits_to_float((uint16_t)(head.x & 0xFFFFu));
        const uint32_t lo = (head.y >> (4 * j)) & 0x0Fu;  // nibble j of scales_l
        const uint32_t hi = (head.x >> (16 + 2 * j)) & 0x03u;
        c.ls0 = c.ls1 = (int)(lo | (hi << 4)) - 32;
        const uint2 q0 = ld_u64_a8(b + L::QS + 16 * j), q1 = ld_u64_a8(b + L::QS + 8 + 16 * j);
        const uint32_t qs[4] = {q0.x, q0.y, q1.x, q1.y};
#pragma unroll
        for (int t = 0; t < 4; ++t) lookup16(qs[t], kv, c.w[t], c.w[4 + t]);
    }
};
static_assert(fmt_iq4_xs::TABLE_WORDS == STRATA_KVALUES_IQ4NL_U32_SIZE, "iq4_xs: staged words != generated table");

struct fmt_iq2_xxs {
    using L = layout::iq2_xxs;  // the block layout (formats/iq2_xxs.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 8, TABLE_WORDS = STRATA_IQ2_XXS_TABLE_WORDS;
    static constexpr bool ONE_SCALE = true;  // ls0 == ls1 always
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = STRATA_IQ2_GRID_MAP, K1 = STRATA_IQ2_GRID_MAP_NEG;
    static __device__ __forceinline__ const uint32_t* table() { return iq2xxs_grid_nib; }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        uint32_t f[2];  // four grid indexes; four 7-bit sign indexes with the scale in bits 28-31
        ld_words_a2(b + L::QS + 8 * j, f);
        const uint32_t idx = f[0], aux = f[1];
        c.dw = ld_half(b) * 0.125f;
        c.ls0 = c.ls1 = 2 * (int)(aux >> 28) + 1;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t nib = t.words[(idx >> (8 * g)) & 0xFFu];
            iq2_group(t, nib, ksign_nibbles((aux >> (7 * g)) & 0x7Fu), c.w[2 * g], c.w[2 * g + 1]);
        }
    }
};
static_assert(fmt_iq2_xxs::TABLE_WORDS == STRATA_IQ2XXS_GRID_NIB_SIZE, "iq2_xxs: staged words != generated table");

struct fmt_iq2_xs {
    using L = layout::iq2_xs;  // the block layout (formats/iq2_xs.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 8, TABLE_WORDS = STRATA_IQ2_XS_TABLE_WORDS;
    static constexpr bool ONE_SCALE = false;  // one scale per 16 values
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = STRATA_IQ2_GRID_MAP, K1 = STRATA_IQ2_GRID_MAP_NEG;
    static __device__ __forceinline__ const uint32_t* table() { return iq2xs_grid_nib; }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        uint32_t f[2];  // four u16 entries: 9-bit grid index, 7-bit sign index
        ld_words_a2(b + L::QS + 8 * j, f);
        const uint32_t q01 = f[0], q23 = f[1];
        const uint32_t sc = ld_u8(b + L::SCALES + j);
        c.dw = ld_half(b) * 0.125f;
        c.ls0 = 2 * (int)(sc & 0x0Fu) + 1;
        c.ls1 = 2 * (int)(sc >> 4) + 1;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t v = ((g < 2 ? q01 : q23) >> (16 * (g & 1))) & 0xFFFFu;
            const uint32_t nib = t.words[v & 0x1FFu];
            iq2_group(t, nib, ksign_nibbles(v >> 9), c.w[2 * g], c.w[2 * g + 1]);
        }
    }
};
static_assert(fmt_iq2_xs::TABLE_WORDS == STRATA_IQ2XS_GRID_NIB_SIZE, "iq2_xs: staged words != generated table");

struct fmt_iq2_s {
    using L = layout::iq2_s;  // the block layout (formats/iq2_s.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 8, TABLE_WORDS = STRATA_IQ2_S_TABLE_WORDS;
    static constexpr bool ONE_SCALE = false;  // one scale per 16 values
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = STRATA_IQ2_GRID_MAP, K1 = STRATA_IQ2_GRID_MAP_NEG;
    static __device__ __forceinline__ const uint32_t* table() { return iq2s_grid_nib; }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        const uint32_t qs = ld_u32_a2(b + L::QS + 4 * j);    // low 8 bits of four grid indexes
        const uint32_t sg = ld_u32_a2(b + L::SIGNS + 4 * j);   // four sign bytes
        const uint32_t qh = ld_u8(b + L::QH + j);           // high 2 bits of the four indexes
        const uint32_t sc = ld_u8(b + L::SCALES + j);
        c.dw = ld_half(b) * 0.125f;
        c.ls0 = 2 * (int)(sc & 0x0Fu) + 1;
        c.ls1 = 2 * (int)(sc >> 4) + 1;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t index = ((qs >> (8 * g)) & 0xFFu) | (((qh >> (2 * g)) & 0x3u) << 8);
            const uint32_t nib = t.words[index];
            iq2_group(t, nib, sign_nibbles((sg >> (8 * g)) & 0xFFu), c.w[2 * g], c.w[2 * g + 1]);
        }
    }
};
static_assert(fmt_iq2_s::TABLE_WORDS == STRATA_IQ2S_GRID_NIB_SIZE, "iq2_s: staged words != generated table");

struct fmt_iq3_xxs {
    using L = layout::iq3_xxs;  // the block layout (formats/iq3_xxs.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 8, TABLE_WORDS = STRATA_IQ3_XXS_TABLE_WORDS;
    static constexpr bool ONE_SCALE = true;  // ls0 == ls1 always
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = 0, K1 = 0;
    static __device__ __forceinline__ const uint32_t* table() { return iq3xxs_grid; }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        uint32_t f[2];  // grid indexes 0-3 and 4-7 (4 values each)
        ld_words_a2(b + L::QS + 8 * j, f);
        const uint32_t i0 = f[0], i1 = f[1];
        const uint32_t aux = ld_u32_a2(b + L::SCALES_SIGNS + 4 * j);  // four 7-bit sign indexes, scale in bits 28-31
        c.dw = ld_half(b) * 0.25f;
        c.ls0 = c.ls1 = 2 * (int)(aux >> 28) + 1;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t idx = g < 2 ? i0 : i1;
            const uint32_t s8 = ksigns8((aux >> (7 * g)) & 0x7Fu);
            c.w[2 * g] = apply_signs(t.words[(idx >> (16 * (g & 1))) & 0xFFu], sign_mask_lo(s8));
            c.w[2 * g + 1] = apply_signs(t.words[(idx >> (16 * (g & 1) + 8)) & 0xFFu], sign_mask_hi(s8));
        }
    }
    // The sign-mask form (sign_masked<F>, new kernels): magnitudes, and masks straight from the 7-bit
    // index (ksign_mask_lo/hi). (The index bytes keep the shift and AND: ptxas folds the word scaling into
    // them, where byte_at would need a LEA after its PRMT.) decode above stays as it was, so old's SASS
    // does not change.
    template <class Look = PlainLookup>
    static __device__ __forceinline__ void decode_masked(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        uint32_t f[2];  // grid indexes 0-3 and 4-7 (4 values each)
        ld_words_a2(b + L::QS + 8 * j, f);
        const uint32_t aux = ld_u32_a2(b + L::SCALES_SIGNS + 4 * j);  // four 7-bit sign indexes, scale in bits 28-31
        c.dw = ld_half(b) * 0.25f;
        c.ls0 = c.ls1 = 2 * (int)(aux >> 28) + 1;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t idx = f[g / 2], k7 = (aux >> (7 * g)) & 0x7Fu;
            c.w[2 * g] = (int)Look::byte_word(t, idx, 16 * (g & 1));
            c.w[2 * g + 1] = (int)Look::byte_word(t, idx, 16 * (g & 1) + 8);
            c.m[2 * g] = ksign_mask_lo(k7);
            c.m[2 * g + 1] = ksign_mask_hi(k7);
        }
    }
};
static_assert(fmt_iq3_xxs::TABLE_WORDS == STRATA_IQ3XXS_GRID_SIZE, "iq3_xxs: staged words != generated table");

struct fmt_iq3_s {
    using L = layout::iq3_s;  // the block layout (formats/iq3_s.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 8, TABLE_WORDS = STRATA_IQ3_S_TABLE_WORDS;
    static constexpr bool ONE_SCALE = true;  // ls0 == ls1 always
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = 0, K1 = 0;
    static __device__ __forceinline__ const uint32_t* table() { return iq3s_grid; }
    // Chunk j's fields: the low index bytes, the 9th bits, the sign bytes; sets dw and the scales.
    struct Fields {
        uint32_t f[2];  // low 8 bits of grid indexes 0-3 and 4-7
        uint32_t qh;    // 9th bit of the eight indexes
        uint32_t sg;    // four sign bytes
    };
    static __device__ __forceinline__ Fields fields(const uint8_t* b, int j, Chunk& c) {
        Fields x;
        ld_words_a2(b + L::QS + 8 * j, x.f);
        x.qh = ld_u8(b + L::QH + j);
        x.sg = ld_u32_a2(b + L::SIGNS + 4 * j);
        const uint32_t sc = (ld_u8(b + L::SCALES + j / 2) >> (4 * (j & 1))) & 0x0Fu;
        c.dw = ld_half(b);
        c.ls0 = c.ls1 = 2 * (int)sc + 1;
        return x;
    }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        const Fields x = fields(b, j, c);
        const uint32_t i0 = x.f[0], i1 = x.f[1], qh = x.qh, sg = x.sg;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t idx = g < 2 ? i0 : i1;
            const int e = 2 * g;  // first of this group's two grid entries
            const uint32_t lo = ((idx >> (16 * (g & 1))) & 0xFFu) | (((qh >> e) & 1u) << 8);
            const uint32_t hi = ((idx >> (16 * (g & 1) + 8)) & 0xFFu) | (((qh >> (e + 1)) & 1u) << 8);
            const uint32_t s8 = (sg >> (8 * g)) & 0xFFu;
            c.w[2 * g] = apply_signs(t.words[lo], sign_mask_lo(s8));
            c.w[2 * g + 1] = apply_signs(t.words[hi], sign_mask_hi(s8));
        }
    }
    // The sign-mask form (sign_masked<F>, new kernels): magnitudes and decode's masks. Each index and
    // sign byte comes out with one PRMT (byte_at) where a shift and an AND take two integer-ALU
    // instructions (the 9th index bit needs the LEA that scales the index either way).
    template <class Look = PlainLookup>
    static __device__ __forceinline__ void decode_masked(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        const Fields x = fields(b, j, c);
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const int e = 2 * g;  // first of this group's two grid entries
            const uint32_t lo = byte_at(x.f[g / 2], 2 * (g & 1)) | ((x.qh << (8 - e)) & 0x100u);
            const uint32_t hi = byte_at(x.f[g / 2], 2 * (g & 1) + 1) | ((x.qh << (7 - e)) & 0x100u);
            c.w[2 * g] = (int)Look::word(t, lo);
            c.w[2 * g + 1] = (int)Look::word(t, hi);
            const uint32_t s8 = byte_at(x.sg, g);
            c.m[2 * g] = sign_mask_lo(s8);
            c.m[2 * g + 1] = sign_mask_hi(s8);
        }
    }
};
static_assert(fmt_iq3_s::TABLE_WORDS == STRATA_IQ3S_GRID_SIZE, "iq3_s: staged words != generated table");

// IQ1: nibble codes g+1 select bytes of STRATA_IQ1_W_POS (8g+1) or, with 4 added to every selector,
// of STRATA_IQ1_W_NEG (8g-1).
// t.k0 = STRATA_IQ1_W_POS, t.k1 = STRATA_IQ1_W_NEG.
__device__ __forceinline__ void iq1_group(const Tab& t, uint32_t nib, bool neg, int& lo, int& hi) {
    const uint32_t sel = neg ? (nib | 0x44444444u) : nib;
    lo = (int)prmt(t.k0, t.k1, sel);
    hi = (int)prmt(t.k0, t.k1, sel >> 16);
}

struct fmt_iq1_s {
    using L = layout::iq1_s;  // the block layout (formats/iq1_s.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 8, TABLE_WORDS = STRATA_IQ1_S_TABLE_WORDS;
    static constexpr bool ONE_SCALE = true;  // ls0 == ls1 always
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = STRATA_IQ1_W_POS, K1 = STRATA_IQ1_W_NEG;
    static __device__ __forceinline__ const uint32_t* table() { return iq1s_grid_nib; }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        const uint32_t qs = ld_u32_a2(b + L::QS + 4 * j);  // low 8 bits of four 11-bit grid indexes
        const uint32_t qh = ld_u16(b + L::QH + 2 * j);    // 3 high bits x4, scale bits 12-14, delta sign bit 15
        c.dw = ld_half(b) * 0.125f;
        c.ls0 = c.ls1 = 2 * (int)((qh >> 12) & 7u) + 1;
        const bool neg = (qh & 0x8000u) != 0;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t index = ((qs >> (8 * g)) & 0xFFu) | (((qh >> (3 * g)) & 7u) << 8);
            iq1_group(t, t.words[index], neg, c.w[2 * g], c.w[2 * g + 1]);
        }
    }
};
static_assert(fmt_iq1_s::TABLE_WORDS == STRATA_IQ1S_GRID_NIB_SIZE, "iq1_s: staged words != generated table");

struct fmt_iq1_m {
    using L = layout::iq1_m;  // the block layout (formats/iq1_m.cuh)
    static constexpr int QK = L::QK, BYTES = L::BYTES, CHUNKS = 8, TABLE_WORDS = STRATA_IQ1_M_TABLE_WORDS;
    static constexpr bool ONE_SCALE = false;  // one scale per 16 values
    static constexpr bool SIGN_MASKS = false;  // w holds the signed weights
    static constexpr uint32_t K0 = STRATA_IQ1_W_POS, K1 = STRATA_IQ1_W_NEG;
    static __device__ __forceinline__ const uint32_t* table() { return iq1s_grid_nib; }
    // The fp16 d is spread over the top nibbles of the four u16 scale words at byte 48 (sc = those
    // 8 bytes as two words).
    static __device__ __forceinline__ float block_d(uint2 sc) {
        const uint32_t bits = ((sc.x >> 12) & 0x000Fu) | ((sc.x >> 24) & 0x00F0u)
                            | ((sc.y >> 4) & 0x0F00u) | ((sc.y >> 16) & 0xF000u);
        return fp16_bits_to_float((uint16_t)bits);
    }
    static __device__ __forceinline__ float block_d(const uint8_t* b) { return block_d(ld_u64_a8(b + L::SCALES)); }
    static __device__ __forceinline__ void decode(const uint8_t* b, int j, const Tab& t, Chunk& c) {
        const uint32_t qs = __ldg(reinterpret_cast<const uint32_t*>(b + L::QS + 4 * j));  // low 8 bits of 4 indexes
        const uint32_t qh = ld_u16(b + L::QH + 2 * j);     // per group a nibble: 3 high bits, delta sign bit 3
        const uint2 sc = ld_u64_a8(b + L::SCALES);             // 16 3-bit scales and d's nibbles
        const uint32_t sw = (j < 4 ? sc.x : sc.y) >> (16 * ((j / 2) & 1));  // scales 2j, 2j+1
        const int shift = 6 * (j & 1);
        c.dw = block_d(sc) * 0.125f;
        c.ls0 = 2 * (int)((sw >> shift) & 7u) + 1;
        c.ls1 = 2 * (int)((sw >> (shift + 3)) & 7u) + 1;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t h = (qh >> (4 * g)) & 0xFu;
            const uint32_t index = ((qs >> (8 * g)) & 0xFFu) | ((h & 7u) << 8);
            iq1_group(t, t.words[index], (h & 8u) != 0, c.w[2 * g], c.w[2 * g + 1]);
        }
    }
};
static_assert(fmt_iq1_m::TABLE_WORDS == STRATA_IQ1S_GRID_NIB_SIZE, "iq1_m: staged words != generated table");

// Lane -> chunk walk along a row: lane l takes chunks l, l+32, l+64, ... Because 32 is a multiple of
// CHUNKS (1, 2 or 8), the chunk's index inside its block (l % CHUNKS) is the same at every step and the
// block pointer advances by a constant, so no division runs in the loop.
template <class F>
struct LaneWalk {
    int j;        // chunk inside the block, fixed for the lane
    int first;    // byte offset of the lane's first block in a row
    static constexpr int STEP = (32 / F::CHUNKS) * F::BYTES;  // bytes between the lane's blocks
    __device__ __forceinline__ explicit LaneWalk(int lane) : j(lane % F::CHUNKS), first((lane / F::CHUNKS) * F::BYTES) {}
};

// The format's table in global memory with its constants as compile-time values (old kernels).
template <class F>
__device__ __forceinline__ Tab global_tab() { return Tab{F::table(), F::K0, F::K1}; }

// How many interleaved copies of its table a decoder reads (TABLE_COPIES: decoders.cuh's TableRep
// decoders); 1 for the formats. Copy k of word i is staged at i * N + k.
template <class F, class = void>
struct TableCopies {
    static constexpr int N = 1;
};
template <class F>
struct TableCopies<F, decltype((void)F::TABLE_COPIES)> {
    static constexpr int N = F::TABLE_COPIES;
};

// Shared-memory words a new kernel declares for a format: the table (in its copies), then K0 and K1.
template <class F>
struct SharedTab {
    static constexpr int TABLE = F::TABLE_WORDS * TableCopies<F>::N;
    static constexpr int WORDS = TABLE + 2;
};

// Copy a format's table (each word N times, side by side) and constants into shared memory (every
// thread of the block calls it; sync before shared_tab reads them back). Consecutive threads write
// consecutive words (no bank conflicts); with copies they read the same global word (one request).
template <class F>
__device__ __forceinline__ void stage_table(uint32_t* dst) {
    constexpr int N = TableCopies<F>::N, W = SharedTab<F>::TABLE;
    for (int i = threadIdx.x; i < W; i += blockDim.x) dst[i] = F::table()[i / N];
    if (threadIdx.x == 0) {
        dst[W] = F::K0;
        dst[W + 1] = F::K1;
    }
}

// The staged table, with the constants loaded into registers (after the barrier).
template <class F>
__device__ __forceinline__ Tab shared_tab(const uint32_t* staged) {
    return Tab{staged, staged[SharedTab<F>::TABLE], staged[SharedTab<F>::TABLE + 1]};
}

}  // namespace siq
