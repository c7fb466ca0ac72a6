// formats_iq3.cuh: the decoders of iq3_xxs and iq3_s (4-value grid words with sign bytes), both sign forms.
// Part of the decode contract of common/iq_decode.cuh (read its ARITHMETIC CONTRACT first); split
// from it so that no header grows past a few hundred lines. Host-compilable (tests/iq_host).
#pragma once
#include "common/decode_ops.cuh"
#include "generated/iq_tables.cuh"
#include "formats/iq3_xxs.cuh"
#include "formats/iq3_s.cuh"

namespace siq {

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

}  // namespace siq
