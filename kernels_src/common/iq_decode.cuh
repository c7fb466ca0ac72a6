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
#include "common/decode_ops.cuh"  // Chunk, Tab, loads, byte tricks
// Each format: QK values and BYTES bytes per block, CHUNKS = QK/32, TABLE_WORDS (0 = no table) and
// table() (its generated global table), decode(block, j, tab, out) for chunk j of the block, where tab
// points at the table in global or shared memory (same words either way).
#include "common/formats_q.cuh"  // fmt_q8_0, fmt_q2_0, fmt_iq4_nl, fmt_iq4_xs
#include "common/formats_iq2.cuh"  // fmt_iq2_xxs, fmt_iq2_xs, fmt_iq2_s
#include "common/formats_iq3.cuh"  // fmt_iq3_xxs, fmt_iq3_s
#include "common/formats_iq1.cuh"  // fmt_iq1_s, fmt_iq1_m

namespace siq {

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
// from overflow, and only the end is read as a float (on the CPU: tests/families/test_dequant.py for
// the formats at the extreme codes, tests/families/test_mmvq_decoders.py for the decoders' chains).
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
