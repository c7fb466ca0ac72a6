// dequant.cuh: per-format chunk dequantization in gguf-py's float32 operation order (dequant.cu's
// ARITHMETIC CONTRACT explains why it is bit-identical). Included by dequant.cu and by the host
// emulation test (tests/iq_host), so it uses no kernel-only constructs.
#pragma once
#include "common/iq_decode.cuh"

namespace deq {

using namespace siq;

__device__ __forceinline__ float sign_of(uint32_t s8, int i) { return (s8 >> i) & 1u ? -1.0f : 1.0f; }
__device__ __forceinline__ float byte_of(uint32_t word, int i) { return (float)((word >> (8 * i)) & 0xFFu); }
__device__ __forceinline__ float iq2_value(uint32_t nib, int i) {
    return byte_of(STRATA_IQ2_GRID_MAP, (nib >> (4 * i)) & 0xFu);
}

// IQ2 group of 8: (db * grid) * sign, gguf's order.
__device__ __forceinline__ void iq2_group(float db, uint32_t nib, uint32_t s8, float* v) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = db * iq2_value(nib, i) * sign_of(s8, i);
}

// IQ3 group of 8 (two 4-byte grid entries): (db * grid) * sign.
__device__ __forceinline__ void iq3_group(float db, uint32_t g0, uint32_t g1, uint32_t s8, float* v) {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = db * byte_of(g0, i) * sign_of(s8, i);
#pragma unroll
    for (int i = 0; i < 4; ++i) v[4 + i] = db * byte_of(g1, i) * sign_of(s8, 4 + i);
}

// IQ1 group of 8: dl * (grid + delta), grid in {-1, 0, 1} from the nibble codes g+1.
__device__ __forceinline__ void iq1_group(float dl, uint32_t nib, bool neg, float* v) {
    const float delta = neg ? -0.125f : 0.125f;
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = dl * ((float)((int)((nib >> (4 * i)) & 0xFu) - 1) + delta);
}

// IQ4: 32 nibble codes of qs[0..15] (low nibbles: values 0-15, high: 16-31) -> dl * kvalue.
__device__ __forceinline__ void iq4_chunk(float dl, const uint8_t* qs, float* v) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const uint32_t q = ld_u8(qs + i);
        v[i] = dl * (float)kvalues_iq4nl[q & 0xFu];
        v[16 + i] = dl * (float)kvalues_iq4nl[q >> 4];
    }
}

template <class F> struct Deq;

template <> struct Deq<fmt_q8_0> {
    using L = fmt_q8_0::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int, float* v) {
        const float d = ld_half(b);
#pragma unroll
        for (int i = 0; i < 32; ++i) v[i] = (float)(int8_t)ld_u8(b + L::QS + i) * d;  // gguf: x * d
    }
};

template <> struct Deq<fmt_q2_0> {
    using L = fmt_q2_0::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const float d = ld_half(b);
#pragma unroll
        for (int e = 0; e < 32; ++e) {
            const uint32_t code = (ld_u8(b + L::QS + e % 16) >> (4 * j + 2 * (e / 16))) & 3u;
            v[e] = d * ((float)code * 2.0f - 3.0f);  // reference: levels = code * 2 - 3, then d * levels
        }
    }
};

template <> struct Deq<fmt_iq4_nl> {
    using L = fmt_iq4_nl::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int, float* v) { iq4_chunk(ld_half(b), b + L::QS, v); }
};

template <> struct Deq<fmt_iq4_xs> {
    using L = fmt_iq4_xs::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const uint32_t lo = (ld_u8(b + L::SCALES_L + j / 2) >> (4 * (j & 1))) & 0x0Fu;
        const uint32_t hi = (ld_u16(b + L::SCALES_H) >> (2 * j)) & 0x03u;
        const float dl = ld_half(b) * (float)((int)(lo | (hi << 4)) - 32);  // gguf: d * float(scale - 32)
        iq4_chunk(dl, b + L::QS + 16 * j, v);
    }
};

template <> struct Deq<fmt_iq2_xxs> {
    using L = fmt_iq2_xxs::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const uint32_t idx = ld_u32_a2(b + L::QS + 8 * j);
        const uint32_t aux = ld_u32_a2(b + L::QS + 4 + 8 * j);
        const float db = ld_half(b) * (0.5f + (float)(aux >> 28)) * 0.25f;
#pragma unroll
        for (int g = 0; g < 4; ++g)
            iq2_group(db, iq2xxs_grid_nib[(idx >> (8 * g)) & 0xFFu], ksigns8((aux >> (7 * g)) & 0x7Fu), v + 8 * g);
    }
};

template <> struct Deq<fmt_iq2_xs> {
    using L = fmt_iq2_xs::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const uint32_t q01 = ld_u32_a2(b + L::QS + 8 * j);
        const uint32_t q23 = ld_u32_a2(b + L::QS + 4 + 8 * j);
        const uint32_t sc = ld_u8(b + L::SCALES + j);
        const float d = ld_half(b);
        const float db0 = d * (0.5f + (float)(sc & 0x0Fu)) * 0.25f;
        const float db1 = d * (0.5f + (float)(sc >> 4)) * 0.25f;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t e = ((g < 2 ? q01 : q23) >> (16 * (g & 1))) & 0xFFFFu;
            iq2_group(g < 2 ? db0 : db1, iq2xs_grid_nib[e & 0x1FFu], ksigns8(e >> 9), v + 8 * g);
        }
    }
};

template <> struct Deq<fmt_iq2_s> {
    using L = fmt_iq2_s::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const uint32_t qs = ld_u32_a2(b + L::QS + 4 * j);
        const uint32_t sg = ld_u32_a2(b + L::SIGNS + 4 * j);
        const uint32_t qh = ld_u8(b + L::QH + j);
        const uint32_t sc = ld_u8(b + L::SCALES + j);
        const float d = ld_half(b);
        const float db0 = d * (0.5f + (float)(sc & 0x0Fu)) * 0.25f;
        const float db1 = d * (0.5f + (float)(sc >> 4)) * 0.25f;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t index = ((qs >> (8 * g)) & 0xFFu) | (((qh >> (2 * g)) & 0x3u) << 8);
            iq2_group(g < 2 ? db0 : db1, iq2s_grid_nib[index], (sg >> (8 * g)) & 0xFFu, v + 8 * g);
        }
    }
};

template <> struct Deq<fmt_iq3_xxs> {
    using L = fmt_iq3_xxs::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const uint32_t i0 = ld_u32_a2(b + L::QS + 8 * j);
        const uint32_t i1 = ld_u32_a2(b + L::QS + 4 + 8 * j);
        const uint32_t aux = ld_u32_a2(b + L::SCALES_SIGNS + 4 * j);
        const float db = ld_half(b) * (0.5f + (float)(aux >> 28)) * 0.5f;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t idx = (g < 2 ? i0 : i1) >> (16 * (g & 1));
            iq3_group(db, iq3xxs_grid[idx & 0xFFu], iq3xxs_grid[(idx >> 8) & 0xFFu],
                      ksigns8((aux >> (7 * g)) & 0x7Fu), v + 8 * g);
        }
    }
};

template <> struct Deq<fmt_iq3_s> {
    using L = fmt_iq3_s::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const uint32_t i0 = ld_u32_a2(b + L::QS + 8 * j);
        const uint32_t i1 = ld_u32_a2(b + L::QS + 4 + 8 * j);
        const uint32_t qh = ld_u8(b + L::QH + j);
        const uint32_t sg = ld_u32_a2(b + L::SIGNS + 4 * j);
        const uint32_t sc = (ld_u8(b + L::SCALES + j / 2) >> (4 * (j & 1))) & 0x0Fu;
        const float db = ld_half(b) * (float)(1 + 2 * sc);  // gguf: d * (1 + 2 * scale)
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t idx = (g < 2 ? i0 : i1) >> (16 * (g & 1));
            const uint32_t lo = (idx & 0xFFu) | (((qh >> (2 * g)) & 1u) << 8);
            const uint32_t hi = ((idx >> 8) & 0xFFu) | (((qh >> (2 * g + 1)) & 1u) << 8);
            iq3_group(db, iq3s_grid[lo], iq3s_grid[hi], (sg >> (8 * g)) & 0xFFu, v + 8 * g);
        }
    }
};

template <> struct Deq<fmt_iq1_s> {
    using L = fmt_iq1_s::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const uint32_t qs = ld_u32_a2(b + L::QS + 4 * j);
        const uint32_t qh = ld_u16(b + L::QH + 2 * j);
        const float dl = ld_half(b) * (float)(2 * ((qh >> 12) & 7u) + 1);
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t index = ((qs >> (8 * g)) & 0xFFu) | (((qh >> (3 * g)) & 7u) << 8);
            iq1_group(dl, iq1s_grid_nib[index], (qh & 0x8000u) != 0, v + 8 * g);
        }
    }
};

template <> struct Deq<fmt_iq1_m> {
    using L = fmt_iq1_m::L;
    static __device__ __forceinline__ void chunk(const uint8_t* b, int j, float* v) {
        const uint32_t qs = ld_u32_a2(b + L::QS + 4 * j);
        const uint32_t qh = ld_u16(b + L::QH + 2 * j);
        const uint32_t sw = ld_u16(b + L::SCALES + 2 * (j / 2));
        const int shift = 6 * (j & 1);
        const float d = fmt_iq1_m::block_d(b);
        const float dl0 = d * (float)(2 * ((sw >> shift) & 7u) + 1);
        const float dl1 = d * (float)(2 * ((sw >> (shift + 3)) & 7u) + 1);
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const uint32_t h = (qh >> (4 * g)) & 0xFu;
            const uint32_t index = ((qs >> (8 * g)) & 0xFFu) | ((h & 7u) << 8);
            iq1_group(g < 2 ? dl0 : dl1, iq1s_grid_nib[index], (h & 8u) != 0, v + 8 * g);
        }
    }
};

}  // namespace deq
