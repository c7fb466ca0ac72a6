// formats_iq1.cuh: the decoders of iq1_s and iq1_m (ternary grid nibbles with a +-1/8 delta).
// Part of the decode contract of common/iq_decode.cuh (read its ARITHMETIC CONTRACT first); split
// from it so that no header grows past a few hundred lines. Host-compilable (tests/iq_host).
#pragma once
#include "common/decode_ops.cuh"
#include "generated/iq_tables.cuh"
#include "formats/iq1_s.cuh"
#include "formats/iq1_m.cuh"

namespace siq {

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

}  // namespace siq
