// formats_q.cuh: the decoders of q8_0, q2_0, iq4_nl and iq4_xs (one scale per chunk, no grid).
// Part of the decode contract of common/iq_decode.cuh (read its ARITHMETIC CONTRACT first); split
// from it so that no header grows past a few hundred lines. Host-compilable (tests/iq_host).
#pragma once
#include "common/decode_ops.cuh"
#include "generated/iq_tables.cuh"
#include "formats/q8_0.cuh"
#include "formats/q2_0.cuh"
#include "formats/iq4_nl.cuh"
#include "formats/iq4_xs.cuh"

namespace siq {

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

}  // namespace siq
