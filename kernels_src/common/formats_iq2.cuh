// formats_iq2.cuh: the decoders of iq2_xxs, iq2_xs and iq2_s (grid bytes with sign bits).
// Part of the decode contract of common/iq_decode.cuh (read its ARITHMETIC CONTRACT first); split
// from it so that no header grows past a few hundred lines. Host-compilable (tests/iq_host).
#pragma once
#include "common/decode_ops.cuh"
#include "generated/iq_tables.cuh"
#include "formats/iq2_xxs.cuh"
#include "formats/iq2_xs.cuh"
#include "formats/iq2_s.cuh"

namespace siq {

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

}  // namespace siq
