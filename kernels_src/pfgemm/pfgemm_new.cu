// pfgemm_new.cu: the second prompt-expert GEMM, for IQ2_S (K % 512 == 0) and IQ4_NL (K % 128 == 0) with
// N % 128 == 0. Every other format and shape keeps pfgemm_old.cu (the Python family's dispatcher chooses).
//
// ARITHMETIC CONTRACT (the same as pfgemm_old.cu, so both have the same float64 error)
// - Weights: each value is exact in fp32 and rounded once to fp16, nearest even (pf_common.cuh). IQ2_S
//   takes a shortcut with the same result: a grid magnitude is one of 8, 25 or 43, so the three fp16
//   values rn(dl * 8), rn(dl * 25), rn(dl * 43) are rounded once per 16-value scale and each weight
//   picks its own with a byte permute; its sign bit is then flipped where the sign byte says so
//   (rn(-x) == -rn(x)). IQ4_NL computes d * kvalue in fp32 (exact) and rounds each with __floats2half2_rn.
// - Activations: fp16, copied as 16-byte vectors, never converted.
// - Sums: each output is one fp32 wmma accumulator, zeroed, then one mma_sync per 16-value k step in
//   ascending k (4 steps per 64-value stage, stages in order): the same fragment types, orientation
//   (A = X row-major, B = W column-major) and instruction sequence as the old kernel. The two kernels
//   therefore give identical outputs in practice and identical max |err| against float64 by contract.
// - Output: fp32; rows past the group's end are never written.
//
// Geometry: a block = 128 weight rows of one expert x 64 token rows of its group; 8 warps as 4 (weight
// rows) x 2 (tokens), each a 32 x 32 output piece in 2 x 2 fragments. K runs in stages of 64 values.
// Raw weights: a "raw stage" is the bytes of one whole-block K window per row, copied to shared memory
// as aligned 4-byte words: IQ2_S one super-block (256 values: 21 words = the 82 bytes plus 2 bytes of a
// neighbouring block, which K % 512 == 0 keeps 4-byte aligned and inside the row), IQ4_NL four blocks
// (128 values: 72 bytes, read as nine 8-byte words since K % 128 == 0 keeps rows 8-byte aligned). Each
// of the 256 threads dequantizes exactly one 32-value sub-block per stage (thread t: weight row t % 128,
// sub-block t / 128 of the stage) into the fp16 W tile, with four 16-byte shared stores.
// Pipelining: at the top of a stage the next stage's activations (and, at a window's first stage, the
// next raw window) are loaded into registers; they are stored to shared memory after the tensor cores
// have finished with the current stage, so global latency overlaps decoding and mma work.
// Tables: IQ2_S grid as byte-permute selectors in shared memory (1024 x 8 B, built from the generated
// iq2s_grid per block); IQ4_NL byte -> two kvalues by byte permutes on the 16-byte table held in four
// registers (a shared-memory lookup per byte would add ~400 bank-conflicted wavefronts per stage, as
// many as the tensor-core operand loads).
// Shared memory (static): W 128 x 72 fp16 (18,432 B) + X 64 x 72 fp16 (9,216 B) + raw (IQ2_S 128 x 21
// words = 10,752 B; IQ4_NL 128 x 19 words = 9,728 B) + IQ2_S selectors (8,192 B) + 12 B:
// 46,604 B (IQ2_S) / 37,388 B (IQ4_NL). The per-warp output scratch for an expert's last partial tile
// reuses the W tile after the last stage.
#include "pfgemm/pf_common.cuh"

namespace {

constexpr int NEW_ROWS = STRATA_PFGEMM_NEW_ROWS;            // weight rows per block
constexpr int NEW_TILE_ROWS = STRATA_PFGEMM_NEW_TILE_ROWS;  // token rows per block
constexpr int NEW_KS = 64;          // k values per stage
constexpr int NEW_LD = NEW_KS + 8;  // padded fp16 row: 16-byte rows of 8 consecutive tiles hit 8 bank groups
constexpr int NEW_THREADS = STRATA_PFGEMM_THREADS;

// The 4 bytes at byte offset O + 4 k of a row of words in shared memory (O is a compile-time constant,
// so an aligned field costs one load and an offset-2 field two loads and a funnel shift).
template <int O>
__device__ __forceinline__ unsigned bytes4_at(const unsigned* row, int k) {
    if (O % 4 == 0) return row[O / 4 + k];
    return __funnelshift_r(row[O / 4 + k], row[O / 4 + k + 1], 8 * (O % 4));
}
template <int O>
__device__ __forceinline__ unsigned byte_at(const unsigned* row, int k) {
    const int o = O + k;
    return (row[o >> 2] >> (8 * (o & 3))) & 0xffu;
}
__device__ __forceinline__ unsigned half2_bits(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const unsigned*>(&h);
}
// prmt.b32 without the 0x7777 mask nvcc adds to __byte_perm: for selectors whose nibbles are all < 8.
__device__ __forceinline__ unsigned prmt(unsigned a, unsigned b, unsigned sel) {
    unsigned r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

// --- tables ---------------------------------------------------------------------------------------

// IQ2_S: grid entry -> four byte-permute selectors (16 bits each, one per pair of values). Magnitude
// code c (0x08 -> 0, 0x19 -> 1, 0x2b -> 2) picks bytes 2c, 2c+1 of the 8-byte table {rn(8 dl), rn(25 dl),
// rn(43 dl), 0}.
__device__ __forceinline__ unsigned iq2s_pair_selector(unsigned long long entry, int p) {
    const unsigned b0 = (unsigned)(entry >> (16 * p)) & 0xffu, b1 = (unsigned)(entry >> (16 * p + 8)) & 0xffu;
    const unsigned c0 = (b0 > 0x08u) + (b0 > 0x19u), c1 = (b1 > 0x08u) + (b1 > 0x19u);
    return (2 * c0) | ((2 * c0 + 1) << 4) | ((2 * c1) << 8) | ((2 * c1 + 1) << 12);
}

// IQ2_S: the selector table in shared memory (built from the generated grid once per block).
__device__ void fill_iq2s_selectors(uint2* s_sel) {
    for (int i = threadIdx.x; i < 1024; i += NEW_THREADS) {
        const unsigned long long e = iq2s_grid[i];
        s_sel[i] = make_uint2(iq2s_pair_selector(e, 0) | (iq2s_pair_selector(e, 1) << 16),
                              iq2s_pair_selector(e, 2) | (iq2s_pair_selector(e, 3) << 16));
    }
}

// IQ4_NL: kvalues + 128 as 16 unsigned bytes in 4 registers (adding 128 to an int8 flips its top bit).
__device__ __forceinline__ void load_iq4nl_table(unsigned (&t)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) t[i] = kvalues_iq4nl_u32[i] ^ 0x80808080u;
}

// --- decoding one 32-value sub-block into 32 fp16 weights (four 16-byte stores) -------------------

// IQ2_S sub-block ib32 (0..7) of the super-block that starts at byte BOFF of `row`.
template <int BOFF>
__device__ __forceinline__ void decode_iq2s(const unsigned* row, int ib32, const uint2* sel_table, uint4* dst) {
    const unsigned d_bits = BOFF ? row[0] >> 16 : row[0] & 0xffffu;
    const unsigned qs4 = bytes4_at<BOFF + layout::iq2_s::QS>(row, ib32);
    const unsigned signs4 = bytes4_at<BOFF + layout::iq2_s::SIGNS>(row, ib32);
    const unsigned qh = byte_at<BOFF + layout::iq2_s::QH>(row, ib32);
    const unsigned sc = byte_at<BOFF + layout::iq2_s::SCALES>(row, ib32);
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // groups 0-1 use the low scale nibble, 2-3 the high one
        const float dl = pf::iq2s_scale((unsigned short)d_bits, half ? sc >> 4 : sc & 15u);
        const unsigned lut_lo = half2_bits(dl * 8.0f, dl * 25.0f);
        const unsigned lut_hi = half2_bits(dl * 43.0f, 0.0f);
#pragma unroll
        for (int l = 2 * half; l < 2 * half + 2; ++l) {
            const uint2 sel = sel_table[pf::iq2s_grid_index(__byte_perm(qs4, 0, 0x4440 + l), qh, l)];
            const unsigned s = __byte_perm(signs4, 0, 0x4440 + l);
            unsigned w[4];
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                const unsigned selp = (p < 2 ? sel.x : sel.y) >> (16 * (p & 1));
                // Sign bits 2p, 2p+1 of s move to bits 15 and 31 (the two fp16 sign bits): s times
                // 2^(15-2p) + 2^(30-2p); the two shifted copies cannot overlap, so nothing carries.
                const unsigned flip = (s * ((1u << (15 - 2 * p)) | (1u << (30 - 2 * p)))) & 0x80008000u;
                w[p] = prmt(lut_lo, lut_hi, selp) ^ flip;
            }
            dst[l] = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
}

// IQ4_NL: 4 nibble codes -> their kvalues + 128 as bytes, from the 16-byte table held in 4 registers
// (kv[0..7] in t[0..1], kv[8..15] in t[2..3]). Two byte permutes per 4 codes pick from either half;
// a third keeps, per code, the half its bit 3 names. Returns the low-nibble and the high-nibble results.
__device__ __forceinline__ uint2 iq4nl_lookup(unsigned q, const unsigned (&t)[4]) {
    const unsigned pick_high = 0x32103210u | ((q & 0x88888888u) >> 1);
    unsigned both[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // __byte_perm ignores bit 3 of each selector nibble
        const unsigned from_low = __byte_perm(t[0], t[1], q >> (16 * h));
        const unsigned from_high = __byte_perm(t[2], t[3], q >> (16 * h));
        both[h] = prmt(from_low, from_high, pick_high >> (16 * h));
    }
    return make_uint2(prmt(both[0], both[1], 0x6420), prmt(both[0], both[1], 0x7531));
}

// Two biased kvalue bytes u = kv + 128 (bytes k, k+1 of `bytes`) -> fp16 d * kv, rounded once:
// 0x4B0000uu is the float 2^23 + u, minus 2^23 + 128 gives kv exactly, kv * d is exact (7 + 11 bits).
__device__ __forceinline__ unsigned iq4nl_pair(unsigned bytes, int k, float d) {
    const float a = __uint_as_float(prmt(bytes, 0x4B000000u, 0x7650 + k)) - 8388736.0f;
    const float b = __uint_as_float(prmt(bytes, 0x4B000000u, 0x7651 + k)) - 8388736.0f;
    return half2_bits(a * d, b * d);
}

// IQ4_NL block j = 2 * in_window + SUB of the raw window: element i from the low nibble of qs[i],
// element i + 16 from its high nibble.
template <int SUB>
__device__ __forceinline__ void decode_iq4nl(const unsigned* row, int in_window, const unsigned (&t)[4],
                                             uint4* dst) {
    const unsigned* blk = row + 9 * in_window;  // two blocks = 36 bytes = 9 words
    const unsigned d_bits = SUB ? blk[4] >> 16 : blk[0] & 0xffffu;
    const float d = __half2float(__ushort_as_half((unsigned short)d_bits));
#pragma unroll
    for (int w = 0; w < 4; w += 2) {  // qs bytes 4w..4w+7: elements 4w..4w+7 and 16+4w..16+4w+7
        const uint2 kv0 = iq4nl_lookup(bytes4_at<18 * SUB + 2>(blk, w), t);
        const uint2 kv1 = iq4nl_lookup(bytes4_at<18 * SUB + 2>(blk, w + 1), t);
        dst[w / 2] = make_uint4(iq4nl_pair(kv0.x, 0, d), iq4nl_pair(kv0.x, 2, d),
                                iq4nl_pair(kv1.x, 0, d), iq4nl_pair(kv1.x, 2, d));
        dst[2 + w / 2] = make_uint4(iq4nl_pair(kv0.y, 0, d), iq4nl_pair(kv0.y, 2, d),
                                    iq4nl_pair(kv1.y, 0, d), iq4nl_pair(kv1.y, 2, d));
    }
}

// --- raw windows: global -> registers -> shared ---------------------------------------------------

// threadIdx.x read through volatile asm: the compiler cannot hoist the raw-copy addresses out of the
// K loop into a dozen registers, which would cost more (occupancy) than recomputing them costs (time).
__device__ __forceinline__ unsigned opaque_tid() {
    unsigned t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
}

template <int FMT> struct RawWindow;

// IQ2_S: one super-block per row, 21 words (82 bytes + 2 of a neighbour). Eight threads share a row:
// thread q of the eight copies words q, q + 8 and (q < 5) q + 16, for rows r, r + 32, r + 64, r + 96.
template <> struct RawWindow<pf::FMT_IQ2_S> {
    static constexpr int VALUES = 256;
    static constexpr int LD = 21;  // odd: 32 consecutive rows at one offset hit 32 different banks
    static constexpr int TABLE_ENTRIES = 1024;
    static constexpr int REGS = 12;
    __device__ static void load(unsigned (&regs)[REGS], const unsigned* __restrict__ w_words, int row_words,
                                int window) {
        const unsigned tid = opaque_tid(), q = tid & 7;
        const unsigned* src = w_words + (window * pf::IQ2S_BYTES >> 2) + (tid >> 3) * row_words + q;
#pragma unroll
        for (int pass = 0; pass < 4; ++pass) {
#pragma unroll
            for (int j = 0; j < 3; ++j)
                if (j < 2 || q < 5) regs[3 * pass + j] = __ldg(src + 8 * j);
            src += 32 * row_words;
        }
    }
    __device__ static void store(const unsigned (&regs)[REGS], unsigned* s_raw) {
        const unsigned tid = opaque_tid(), q = tid & 7;
        unsigned* dst = s_raw + (tid >> 3) * LD + q;
#pragma unroll
        for (int pass = 0; pass < 4; ++pass)
#pragma unroll
            for (int j = 0; j < 3; ++j)
                if (j < 2 || q < 5) dst[32 * LD * pass + 8 * j] = regs[3 * pass + j];
    }
};

// IQ4_NL: four blocks per row, 72 bytes = 9 aligned 8-byte words (K % 128 == 0 keeps rows 8-byte
// aligned). Eight threads share a row for words 0-7 (rows r, r + 32, r + 64, r + 96); threads 0-127
// copy word 8 of row tid.
template <> struct RawWindow<pf::FMT_IQ4_NL> {
    static constexpr int VALUES = 128;
    static constexpr int LD = 19;  // words; odd for conflict-free decoding, so stores are 4-byte
    static constexpr int TABLE_ENTRIES = 1;  // its table lives in registers
    static constexpr int REGS = 10;
    __device__ static void load(unsigned (&regs)[REGS], const unsigned* __restrict__ w_words, int row_words,
                                int window) {
        const unsigned tid = opaque_tid();
        const uint2* base = reinterpret_cast<const uint2*>(w_words + 18 * window);
        const int row_pairs = row_words / 2;
        const uint2* src = base + (tid >> 3) * row_pairs + (tid & 7);
#pragma unroll
        for (int pass = 0; pass < 4; ++pass) {
            const uint2 v = __ldg(src);
            regs[2 * pass] = v.x;
            regs[2 * pass + 1] = v.y;
            src += 32 * row_pairs;
        }
        if (tid < NEW_ROWS) {
            const uint2 v = __ldg(base + tid * row_pairs + 8);
            regs[8] = v.x;
            regs[9] = v.y;
        }
    }
    __device__ static void store(const unsigned (&regs)[REGS], unsigned* s_raw) {
        const unsigned tid = opaque_tid();
        unsigned* dst = s_raw + (tid >> 3) * LD + 2 * (tid & 7);
#pragma unroll
        for (int pass = 0; pass < 4; ++pass) {
            dst[32 * LD * pass] = regs[2 * pass];
            dst[32 * LD * pass + 1] = regs[2 * pass + 1];
        }
        if (tid < NEW_ROWS) {
            s_raw[tid * LD + 16] = regs[8];
            s_raw[tid * LD + 17] = regs[9];
        }
    }
};

// --- the tensor-core part of one stage ------------------------------------------------------------

// NI live token fragments (1 or 2) x 2 weight fragments, 4 k steps of 16 in ascending order.
template <int NI, typename Acc>
__device__ __forceinline__ void mma_stage(Acc (&acc)[2][2], const __half* a_base, const __half* b_base) {
    using namespace nvcuda;
#pragma unroll
    for (int ks = 0; ks < NEW_KS / 16; ++ks) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], b_base + 16 * j * NEW_LD + 16 * ks, NEW_LD);
#pragma unroll
        for (int i = 0; i < NI; ++i) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
            wmma::load_matrix_sync(a, a_base + 16 * i * NEW_LD + 16 * ks, NEW_LD);
            wmma::mma_sync(acc[i][0], a, b[0], acc[i][0]);
            wmma::mma_sync(acc[i][1], a, b[1], acc[i][1]);
        }
    }
}

}  // namespace

// Grid: x = N / 128 weight-row tiles, y = token tiles (sum over experts of ceil(group / 64), or more).
template <int FMT>
__global__ void __launch_bounds__(NEW_THREADS, 2)
pfgemm_new(const __half* __restrict__ X, const unsigned char* __restrict__ W, const int* __restrict__ offsets,
           float* __restrict__ Y, int N, int K, int n_experts) {
    static_assert(FMT == pf::FMT_IQ2_S || FMT == pf::FMT_IQ4_NL, "pfgemm_new supports IQ2_S and IQ4_NL");
    using namespace nvcuda;
    using R = RawWindow<FMT>;
    constexpr int STAGES_PER_WINDOW = R::VALUES / NEW_KS;

    __shared__ __align__(32) __half s_w[NEW_ROWS * NEW_LD];
    __shared__ __align__(32) __half s_x[NEW_TILE_ROWS * NEW_LD];
    __shared__ __align__(16) unsigned s_raw[NEW_ROWS * R::LD];
    __shared__ __align__(16) uint2 s_sel[R::TABLE_ENTRIES];
    __shared__ int s_info[3];

    if (threadIdx.x < 32) pf::locate_tile<NEW_TILE_ROWS>(offsets, n_experts, blockIdx.y, s_info);
    if (FMT == pf::FMT_IQ2_S) fill_iq2s_selectors(s_sel);
    unsigned kv_table[4];
    if (FMT == pf::FMT_IQ4_NL) load_iq4nl_table(kv_table);
    __syncthreads();
    const int expert = s_info[0];
    if (expert < 0) return;
    const int row0 = s_info[1], row_end = s_info[2];
    const int n0 = blockIdx.x * NEW_ROWS;
    const size_t row_bytes = FMT == pf::FMT_IQ2_S ? (size_t)(K / 256) * pf::IQ2S_BYTES
                                                  : (size_t)(K / 32) * pf::IQ4NL_BYTES;
    const int row_words = (int)(row_bytes / 4);
    const unsigned* w_words = reinterpret_cast<const unsigned*>(W + ((size_t)expert * N + n0) * row_bytes);

    const int warp = threadIdx.x >> 5;
    const int wn = warp & 3, wt = warp >> 2;           // 4 x 2 warps: weight rows 32 wn.., tokens 32 wt..
    const int dec_row = threadIdx.x & (NEW_ROWS - 1);  // this thread's sub-block: weight row and which half
    const int dec_sub = threadIdx.x >> 7;              // of the stage (uniform within a warp)
    const unsigned* raw_row = s_raw + dec_row * R::LD;
    uint4* w_dst = reinterpret_cast<uint4*>(s_w + dec_row * NEW_LD + 32 * dec_sub);
    const __half* a_base = s_x + 32 * wt * NEW_LD;
    const __half* b_base = s_w + 32 * wn * NEW_LD;
    const int live_frags = min(2, max(0, (row_end - row0 - 32 * wt + 15) / 16));  // token fragments with rows

    // Activations: thread t copies 16-byte vectors (row t / 8 and row t / 8 + 32, column 8 (t % 8));
    // rows past the group's end read as zeros (their results are never stored).
    const uint4* x_src[2];
    uint4* x_dst[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int r = (threadIdx.x >> 3) + 32 * i, c = threadIdx.x & 7;
        x_src[i] = row0 + r < row_end ? reinterpret_cast<const uint4*>(X + (size_t)(row0 + r) * K) + c : nullptr;
        x_dst[i] = reinterpret_cast<uint4*>(s_x + r * NEW_LD) + c;
    }

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    unsigned raw_next[R::REGS];
    uint4 x_next[2];
    R::load(raw_next, w_words, row_words, 0);
#pragma unroll
    for (int i = 0; i < 2; ++i) x_next[i] = x_src[i] ? __ldg(x_src[i]) : make_uint4(0, 0, 0, 0);
    R::store(raw_next, s_raw);
#pragma unroll
    for (int i = 0; i < 2; ++i) *x_dst[i] = x_next[i];
    __syncthreads();

    const int stages = K / NEW_KS;
    for (int s = 0; s < stages; ++s) {
        const int window = s / STAGES_PER_WINDOW, in_window = s % STAGES_PER_WINDOW;
        const bool more_windows = (window + 1) * STAGES_PER_WINDOW < stages;
        // 1. Next activations, and at a window's first stage the next raw window, into registers.
        if (s + 1 < stages) {
#pragma unroll
            for (int i = 0; i < 2; ++i)
                x_next[i] = x_src[i] ? __ldg(x_src[i] + (s + 1) * (NEW_KS / 8)) : make_uint4(0, 0, 0, 0);
        }
        if (in_window == 0 && more_windows) R::load(raw_next, w_words, row_words, window + 1);
        // 2. Decode this thread's sub-block of the stage: raw words -> 32 fp16 weights of the W tile.
        //    (Branches are uniform: IQ2_S super-blocks alternate between byte offsets 0 and 2 of their
        //    words; the IQ4_NL block's offset depends on the warp's half of the stage.)
        if (FMT == pf::FMT_IQ2_S) {
            if (window & 1) decode_iq2s<2>(raw_row, 2 * in_window + dec_sub, s_sel, w_dst);
            else decode_iq2s<0>(raw_row, 2 * in_window + dec_sub, s_sel, w_dst);
        } else {
            if (dec_sub) decode_iq4nl<1>(raw_row, in_window, kv_table, w_dst);
            else decode_iq4nl<0>(raw_row, in_window, kv_table, w_dst);
        }
        __syncthreads();
        // 3. The raw window is decoded completely after its last stage: refill it while the mma runs.
        if (in_window == STAGES_PER_WINDOW - 1 && more_windows) R::store(raw_next, s_raw);
        // 4. Tensor cores (a warp whose token fragments hold no row of the group skips them).
        if (live_frags == 2) mma_stage<2>(acc, a_base, b_base);
        else if (live_frags == 1) mma_stage<1>(acc, a_base, b_base);
        __syncthreads();
        // 5. The X tile is free: the next stage's activations go in.
        if (s + 1 < stages) {
#pragma unroll
            for (int i = 0; i < 2; ++i) *x_dst[i] = x_next[i];
        }
    }

    // Every warp passed the loop's last barrier, so the W tile is free: 8 scratch tiles of 1 KiB.
    float* scratch = reinterpret_cast<float*>(s_w) + warp * pf::WMMA_TILE * pf::WMMA_TILE;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        if (i >= live_frags) continue;
#pragma unroll
        for (int j = 0; j < 2; ++j)
            pf::store_tile(acc[i][j], Y, N, row0 + 32 * wt + 16 * i, n0 + 32 * wn + 16 * j, row_end, scratch);
    }
}
