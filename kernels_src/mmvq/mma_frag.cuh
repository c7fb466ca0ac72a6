// mma_frag.cuh: the part of a chunk's decode one lane of mmvq_mma's m16n8k32 mma needs (mmvq_mma.cu).
//
// Lane 4g + t of the mma supplies Chunk words t and 4 + t (values 4t..4t+3 and 16+4t..16+4t+3) of its
// rows, so it needs only those two words of decode()'s Chunk, with dw and ls. MmaFrag<F>::load(b, j, t,
// kv, tab) gives exactly decode(b, j)'s w[t], w[4 + t], dw and ls0 from the same bytes (the same lookups,
// the same fp16 conversion): tests/iq_host/mma_emul.h checks every lane's words against the full decode
// on the seed and edge data of tests/families/test_mmvq_mma.py. Only one-scale formats (one chunk per
// block, or super-blocks of 8 chunks with one scale per 32 values): the mma's C is then the whole chunk
// integer before the scale, as chunk_isum's one dp4a chain is. The block b is in shared memory (the
// warp's group buffer), so every load here is a plain one (no __ldg: decode()'s ld_u64_a8 and
// ld_words_a2 are global-only). Host-compilable (tests/iq_host), like iq_decode.cuh.
#pragma once
#include "mmvq/mma_common.cuh"  // isum_float, MMA_MAGIC

namespace siq {

struct Frag {
    int lo;    // Chunk word t: values 4t .. 4t+3
    int hi;    // Chunk word 4 + t: values 16+4t .. 16+4t+3
    float dw;  // Chunk.dw
    int ls;    // Chunk.ls0 (== ls1)
};

template <class F>
struct MmaFrag;  // defined only for the formats mmvq_mma runs (experiments/mmvq_mma adds iq2_xxs and iq1_s)

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
// iq2_xxs and iq1_s have no MmaFrag here (experiments/mmvq_mma), but their groups' sizes stay checked here:
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
