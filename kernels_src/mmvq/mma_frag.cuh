// mma_frag.cuh: the part of a chunk's decode one lane of mmvq_mma's m16n8k32 mma needs (mmvq_mma.cu).
//
// Lane 4g + t of the mma supplies Chunk words t and 4 + t (values 4t..4t+3 and 16+4t..16+4t+3) of its
// rows, so it needs only those two words of decode()'s Chunk, with dw and ls. MmaFrag<F>::load gives
// exactly decode()'s w[t], w[4 + t], dw and ls0 from the same bytes (the same lookups, the same fp16
// conversion): tests/iq_host/mma_emul.h checks every lane's words against the full decode on the seed
// and edge data of tests/families/test_mmvq_mma.py. Only one-scale formats with one chunk per block:
// the mma's C is then the whole chunk integer before the scale, as chunk_isum's one dp4a chain is.
// Host-compilable (tests/iq_host), like iq_decode.cuh.
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
struct MmaFrag;  // defined only for the formats mmvq_mma runs

// iq4_nl: qs word t holds the codes of values 4t..4t+3 (low nibbles) and 16+4t.. (high nibbles), so one
// lookup16 gives both words, as decode()'s loop does for its t-th word.
template <>
struct MmaFrag<fmt_iq4_nl> {
    using L = fmt_iq4_nl::L;
    static __device__ __forceinline__ Frag load(const uint8_t* b, int t, const uint32_t (&kv)[4]) {
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
    static __device__ __forceinline__ Frag load(const uint8_t* b, int t, const uint32_t (&)[4]) {
        Frag f;
        f.dw = ld_half(b + L::D);
        f.ls = 1;
        f.lo = (int)ld_u32_a2(b + L::QS + 4 * t);
        f.hi = (int)ld_u32_a2(b + L::QS + 16 + 4 * t);
        return f;
    }
};

// The 4 table words a fragment decoder reads (iq4_nl's kvalues; unused by q8_0), from `words` (global or
// shared memory: the same words).
template <class F>
__device__ __forceinline__ void frag_table(const uint32_t* words, uint32_t (&kv)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) kv[i] = F::TABLE_WORDS >= 4 ? words[i] : 0u;
}

}  // namespace siq
