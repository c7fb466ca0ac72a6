// decode_ops.cuh: the Chunk and Tab types and the loads and byte tricks every format's decode is built from.
// Part of the decode contract of common/iq_decode.cuh (read its ARITHMETIC CONTRACT first); split
// from it so that no header grows past a few hundred lines. Host-compilable (tests/iq_host).
#pragma once
#include "common/strata_common.cuh"

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
// shift and an AND on the integer-ALU pipe (ptxas then scales a lookup index with an IMAD or a LEA).
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

}  // namespace siq
