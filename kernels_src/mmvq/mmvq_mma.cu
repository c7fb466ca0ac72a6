// mmvq_mma.cu: mmvq over 8 activation columns with the chunk integers from tensor-core mma: the 8-column pass
// of mmvq's `new` on tall iq4_nl, q8_0, iq4_xs, iq1_s, iq2_xxs, iq3_xxs, iq3_s, iq1_m, iq2_xs and iq2_s shapes
// (families/mmvq_mma.py says where); formats with one scale per 32 values and an MmaFrag (mma_frag.cuh: iq4_nl,
// q8_0, iq4_xs, iq3_xxs, iq3_s, and the lane-pair decodes fmt_iq1_s_pair and fmt_iq2_xxs_pair; experiments/mmvq_mma
// adds per-lane iq2_xxs and iq1_s), and the formats with a scale per 16 values through their split tags
// (mma_frag_split.cuh: fmt_<iq1_m | iq2_xs | iq2_s>_k16pair, two m16n8k16 mmas a chunk, mma_chunk_k16 below).
// Inputs, outputs and layout as mmvq.cu's mmvq_new<F, 8, ...>: W rows 16-byte aligned with 16 readable bytes after
// the last row, X is [8][K/32] q8_1 blocks (already quantized), Y is [8][y_stride] float32.
//
// ARITHMETIC CONTRACT (mmvq.cu's, kept; iq_decode.cuh has the per-chunk part)
//   Output (row, column): virtual lane v = 0..31 takes chunks v, v+32, v+64, ... in increasing order with
//   acc_v = fmaf(dw * d_act, (float)isum, acc_v) from acc_v = 0.0f; then the 32 acc_v are added with the
//   tree warp_sum_f32's butterfly computes at lane 0; that value is stored. Hence the same bits as
//   mmvq_old / mmvq_new, because every input of every rounding is the same:
//   - isum: one mma.sync.m16n8k32.row.col.s32.s8.s8.s32 gives, for 16 rows x 8 columns of chunk c,
//     C[r][col] = sum over the 32 k of A[r][k] * B[k][col], an exact int32 (|C| <= 32 * 127 * 127 < 2^31;
//     integer addition is associative, so any order inside the mma gives the dp4a chain's integer). A and
//     B use the same k order: lane 4g + t puts Chunk words t and 4 + t of rows g, g + 8 in A's k slots
//     4t..4t+3 and 16+4t..16+4t+3 (PTX ISA, m16n8k32 .s8 fragments: a0 = (row g, k 4t..), a1 = (row g+8,
//     same k), a2 = (row g, k 16+4t..), a3 = (row g+8, k 16+4t..)) and q8_1 words t and 4 + t of column g
//     in B's (b0 = k 4t.., b1 = k 16+4t.., column g); Chunk word i and q8_1 word i hold the same 4 values
//     (4i..4i+3). Then isum = ls * C (ls = 1 for iq4_nl and q8_0, the chunk's integer scale for the
//     super-block formats, iq4_xs's possibly 0 or negative), as chunk_isum's one-scale form; its float is
//     reached without I2F (isum_float_ls: the mma's C input starts at the bits of 1.5 * 2^23; |ls * C| < 2^24,
//     so the fma is exact and gives +0.0f where ls * C = 0, as the conversion does), the same float. A split
//     tag (a scale per 16 values) runs two m16n8k16 mmas, one per 16 values and scale: mma_frag_split.cuh's
//     contract gives chunk_isum's two-scale integer and its float.
//   - dw, d_act: MmaFrag<F> (mma_frag.cuh) gives decode(block, j)'s w[t], w[4+t], dw and ls from the same
//     bytes (chunk c is chunk j = c % CHUNKS of block c / CHUNKS, as the dot walk's); a lane pair (iq1_s,
//     iq2_xxs) gets half of its table selectors from lane t ^ 1 by one shuffle, the selectors that lane computed
//     from the same row's same chunk, so the words are the same (mma_chunk runs warp-uniformly);
//     d_act is the same __half2float of the block's d. dw * d_act and the fmaf are the same operations.
//   - the chains: warp q (0..3) of a tile owns v = 8q + i (i < 8) and walks its chunks c = 32s + 8q + i
//     for s = 0, 1, ... in increasing s, so each acc_v sees its chunks in increasing c, as lane v of old
//     does; a v with no chunk keeps 0.0f, as old's lane does.
//   - the tree: at lane 0 the butterfly computes s1[l] = a[l] + a[l^16] (l < 16), s2[l] = s1[l] +
//     s1[l^8] (l < 8), s3[l] = s2[l] + s2[l^4] (l < 4), s4[l] = s3[l] + s3[l^2] (l < 2), y = s4[0] + s4[1]
//     (lane 0 needs exactly these 31 sums: its value at each level depends on lanes l < 16, 8, 4, 2 only).
//     Here: warps 0 and 1 add the chains of warps 2 and 3 (a[8q+i] + a[8q+i+16] = s1[8q+i]), warp 0 adds
//     warp 1's s1 (s2[i] = s1[i] + s1[i+8]), then levels 3-5 in its registers (tile_tree). Each sum has
//     the butterfly's two operands (a + b where the butterfly may compute b + a: float addition is
//     commutative bit for bit), so the value is the same. tests/iq_host/mma_emul.h runs this schedule on
//     the CPU; tests/families/test_mmvq_mma.py checks it bitwise against the one-warp-per-row order.
//   Nothing else touches the value: the shared-memory partial sums are the tree's own operands.
// Why this order (not v-major, one acc at a time): K outermost, each thread keeps 8 chains x 4 outputs in
//   registers and the weights stream through once, coalesced. v-major would revisit every block of the
//   tile 32 times (only viable with the whole 16-row tile staged: 74 KB at K = 8192 per 16 rows).
// Schedule: a tile group of 4 warps owns a 16-row tile at a time, TG groups per block (persistent: they
//   loop over tiles, so the 8 columns' activations are staged in shared memory once per block, in the
//   mma's fragment order: conflict-free B loads). Each warp copies its 8-chunk group of the 16 rows (16 x
//   8 blocks, or 16 x one 256-value super-block) from global memory with coalesced 16-byte loads of the
//   granules that cover it (MmaGroup: U4 per row; the group starts head bytes into the first, 0 where
//   the group is whole granules) into its own shared buffers, then reads each lane's bytes from there at
//   buffer + head (row stride MmaGroup::ROW, an odd number of granules: rows g = 0..7 start in distinct
//   banks 4 apart, and lanes t = 0..3 of a row read consecutive words or the same one: conflict-free).
//   Rows past the end are clamped for reading and not stored. How the groups reach the buffers is
//   WeightPipe<F, S>: S = 1, one buffer and the next group in registers (stored once the current group's
//   reads are done); S >= 2 (experiments/mmvq_mma), S buffers filled by cp.async, S - 1 groups in flight
//   while one is computed, the first of them issued before the activations are staged. Either way the
//   groups come in the loops' order, the next tile's first ones while the tree runs, and the bytes each
//   mma_chunk reads are the same: the pipe changes when bytes arrive, never which or the math.
#include "mmvq/mma_common.cuh"  // MmaActs, stage_acts_mma, mma_s8, group_sync, tile_tree
#include "mmvq/mma_frag.cuh"  // MmaFrag, MmaGroup
#include "mmvq/mma_frag_split.cuh"  // the split tags fmt_<iq1_m | iq2_xs | iq2_s>_k16pair

using namespace siq;

// Lane's share of warp q's group at chunk c0 of the tile's 16 rows: 16-byte word k = lane + 32 j is
// granule k % U4 of row k / U4. Granules wholly past the row's end are not read (they hold no chunk below
// nchunks); one that ends past it reads at most 15 bytes beyond: the next row's or, after the last row,
// the 16 readable bytes every weight buffer keeps.
template <class F>
__device__ __forceinline__ void load_group(const uint8_t* __restrict__ W, long long row_stride, int rows, int row0,
                                           int c0, int row_bytes, uint4 (&v)[MmaGroup<F>::PER_LANE]) {
    using G = MmaGroup<F>;
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < G::PER_LANE; ++j) {
        const int k = lane + 32 * j, r = k / G::U4, off = G::granule(c0, k % G::U4);
        v[j] = make_uint4(0u, 0u, 0u, 0u);
        if (k < 16 * G::U4 && off < row_bytes) {
            const uint8_t* p = W + (long long)min(row0 + r, rows - 1) * row_stride + off;
            v[j] = __ldg(reinterpret_cast<const uint4*>(p));
        }
    }
}

template <class F>
__device__ __forceinline__ void store_group(uint4* buf, const uint4 (&v)[MmaGroup<F>::PER_LANE]) {
    using G = MmaGroup<F>;
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < G::PER_LANE; ++j)
        if (lane + 32 * j < 16 * G::U4) buf[G::slot(lane + 32 * j)] = v[j];
}

// The stream of groups a warp computes, in order: its tiles (tile, tile + step, ...), in each its chunk
// groups c0 = first_c0, first_c0 + 32, ... (the kernel's loops). A pipe walks one ahead of the compute with
// it to issue loads; a warp whose first_c0 is past the row (8q >= nchunks) has no group at all.
struct GroupCursor {
    int tile, c0;  // the next group to issue
    int first_c0, nchunks, tiles, step;
    __device__ __forceinline__ bool valid() const { return tile < tiles && c0 < nchunks; }
    __device__ __forceinline__ void advance() {
        c0 += 32;
        if (c0 >= nchunks) {
            c0 = first_c0;
            tile += step;
        }
    }
};

// Where the weight rows are (load_group's arguments that do not change over the kernel).
struct WeightSrc {
    const uint8_t* W;
    long long row_stride;
    int rows, row_bytes;
};

// How a warp's groups reach its shared buffers: S stage buffers of one group each (16 rows x 8 blocks).
// kernels_src has S = 1 only (below), the schedule `new` runs; the cp.async stages S >= 2, measured slower
// (docs/PERF_NOTES.md, v7), are experiments/mmvq_mma's (experiments/mmvq_mma/kernels/mma_stages.cuh defines this template).
template <class F, int S>
struct WeightPipe;

// S = 1: one shared buffer, the next group in flight in registers (load_group), stored after the current
// group's reads are done.
template <class F>
struct WeightPipe<F, 1> {
    uint4* base;
    uint4 next[MmaGroup<F>::PER_LANE];
    __device__ __forceinline__ void load(const WeightSrc& src, GroupCursor& cur) {
        if (cur.valid()) load_group<F>(src.W, src.row_stride, src.rows, 16 * cur.tile, cur.c0, src.row_bytes, next);
        cur.advance();
    }
    __device__ __forceinline__ void early(const WeightSrc&, GroupCursor&) {}
    __device__ __forceinline__ void late(const WeightSrc& src, GroupCursor& cur) { load(src, cur); }
    __device__ __forceinline__ const uint8_t* acquire(const WeightSrc& src, GroupCursor& cur) {
        __syncwarp();  // the previous group's reads are done
        store_group<F>(base, next);
        __syncwarp();
        load(src, cur);
        return reinterpret_cast<const uint8_t*>(base);
    }
};

// Chunk i of the group (group = the buffer + the group's head) for the lane's 4 outputs (rows g, g, g+8,
// g+8; columns 2t, 2t+1, 2t, 2t+1): acc[e] = fmaf(dw * d_act, (float)(ls * C[e]), acc[e]), the float
// reached as isum_float_ls (isum_float's value; no I2F for a scale read from the block). Chunk i is
// chunk i % CHUNKS of the group's block i / CHUNKS.
template <class F>
__device__ __forceinline__ void mma_chunk(const uint8_t* group, int i, int c, const MmaActs& xs,
                                          const uint32_t (&kv)[4], const Tab& tab, float (&acc)[4]) {
    using G = MmaGroup<F>;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const uint8_t* block = group + (i / F::CHUNKS) * F::BYTES;
    const Frag f0 = MmaFrag<F>::load(block + g * G::ROW, i % F::CHUNKS, t, kv, tab);
    const Frag f1 = MmaFrag<F>::load(block + (g + 8) * G::ROW, i % F::CHUNKS, t, kv, tab);
    const int a[4] = {f0.lo, f1.lo, f0.hi, f1.hi};
    const int b[2] = {(int)xs.q[64 * c + 8 * t + g], (int)xs.q[64 * c + 32 + 8 * t + g]};
    const float2 d = *reinterpret_cast<const float2*>(xs.d + 8 * c + 2 * t);
    int cm[4];
    mma_s8(a, b, MMA_MAGIC, cm);
    acc[0] = fmaf(f0.dw * d.x, isum_float_ls(cm[0], f0.ls), acc[0]);
    acc[1] = fmaf(f0.dw * d.y, isum_float_ls(cm[1], f0.ls), acc[1]);
    acc[2] = fmaf(f1.dw * d.x, isum_float_ls(cm[2], f1.ls), acc[2]);
    acc[3] = fmaf(f1.dw * d.y, isum_float_ls(cm[3], f1.ls), acc[3]);
}

// mma_chunk for a split tag (mma_frag_split.cuh: a scale per 16 values): the lane's 4 outputs (rows g, g, g + 8,
// g + 8; columns 2t, 2t + 1, 2t, 2t + 1) get acc = fmaf(dw * d_act, float(ls0 * C0 + ls1 * C1), acc), C0 from
// words t (values 0-15), C1 from words 4 + t (values 16-31), one m16n8k16 mma each, the float as
// MmaFrag<F>::isum_float gives it (mma_frag_split.cuh's contract).
template <class F>
__device__ __forceinline__ void mma_chunk_k16(const uint8_t* group, int i, int c, const MmaActs& xs,
                                              const uint32_t (&kv)[4], const Tab& tab, float (&acc)[4]) {
    using G = MmaGroup<F>;
    using M = MmaFrag<F>;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, j = i % F::CHUNKS;
    const uint8_t* b0 = group + (i / F::CHUNKS) * F::BYTES + g * G::ROW;
    const uint8_t* b1 = b0 + 8 * G::ROW;
    const Frag f0 = M::load(b0, j, t, kv, tab);
    const Frag f1 = M::load(b1, j, t, kv, tab);
    const int h0 = M::ls1(b0, j), h1 = M::ls1(b1, j);
    const int lo[2] = {f0.lo, f1.lo}, hi[2] = {f0.hi, f1.hi};
    const float2 d = *reinterpret_cast<const float2*>(xs.d + 8 * c + 2 * t);
    int c0[4], c1[4];
    mma_s8_k16(lo, (int)xs.q[64 * c + 8 * t + g], 0, c0);
    mma_s8_k16(hi, (int)xs.q[64 * c + 32 + 8 * t + g], 0, c1);
    acc[0] = fmaf(f0.dw * d.x, M::isum_float(c0[0], c1[0], f0.ls, h0), acc[0]);
    acc[1] = fmaf(f0.dw * d.y, M::isum_float(c0[1], c1[1], f0.ls, h0), acc[1]);
    acc[2] = fmaf(f1.dw * d.x, M::isum_float(c0[2], c1[2], f1.ls, h1), acc[2]);
    acc[3] = fmaf(f1.dw * d.y, M::isum_float(c0[3], c1[3], f1.ls, h1), acc[3]);
}

// mmvq_mma's loops call mma_chunk<F>; a split tag's is the k16 form (declared before any kernel instantiates it:
// NVRTC instantiates the name expressions after the whole source). experiments/mmvq_mma5 adds its controls' so.
#define MMA_K16_CHUNK(tag)                                                                                      \
    template <>                                                                                                 \
    __device__ __forceinline__ void mma_chunk<tag>(const uint8_t* group, int i, int c, const MmaActs& xs,       \
                                                   const uint32_t (&kv)[4], const Tab& tab, float (&acc)[4]) {   \
        mma_chunk_k16<tag>(group, i, c, xs, kv, tab, acc);                                                      \
    }
#define MMA_K16_PAIR_CHUNK(name) MMA_K16_CHUNK(fmt_##name##_k16pair)
MMA_SPLIT_FORMATS(MMA_K16_PAIR_CHUNK)
#undef MMA_K16_PAIR_CHUNK

// TG: tile groups per block (4 warps each, one 16-row tile at a time), which share the block's staged
// activations: more warps per SM for the same shared memory (at K = 8192 the activations take 72 KiB, so
// TG = 4 gives 16 warps on an SM where 2 blocks of TG = 1 give 8). MINB: blocks per SM the register budget
// must allow.
// S: weight stages per warp (WeightPipe; 1 = the register-staged schedule, the one defined here). None of them
// touches the arithmetic.
template <class F, int TG = 4, int MINB = 1, int S = 1>
__global__ void __launch_bounds__(128 * TG, MINB)
mmvq_mma(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks,
         const block_q8_1* __restrict__ X, float* __restrict__ Y, int y_stride) {
    static_assert(F::ONE_SCALE, "mmvq_mma: one scale per chunk");
    using G = MmaGroup<F>;
    __shared__ uint32_t staged[SharedTab<F>::WORDS];
    // Dynamic (static shared memory stops at 48 KiB): the activations (72 words per chunk), then each
    // warp's 16 rows x 8 blocks, then each tile group's tile_tree operands (families/mmvq_mma.py,
    // MmaConfig.shared_bytes, adds them up for the launch).
    extern __shared__ __align__(16) uint32_t smem[];
    uint4* const groups = reinterpret_cast<uint4*>(smem + 72 * nchunks);
    float* const parts = reinterpret_cast<float*>(groups + 4 * TG * S * G::WORDS);
    const int lane = threadIdx.x % 32, q = (threadIdx.x / 32) % 4, tg = threadIdx.x / 128, g = lane / 4, t = lane % 4;
    const WeightSrc src{W, row_stride, rows, nchunks / F::CHUNKS * F::BYTES};
    const int tiles = (rows + 15) / 16;
    const int tile_step = gridDim.x * TG;
    int tile = blockIdx.x * TG + tg;
    // The groups in flight walk ahead of the loops below through the same sequence, across tiles: the
    // next tile's first groups are loaded while this tile's tree runs.
    GroupCursor ahead{tile, 8 * q, 8 * q, nchunks, tiles, tile_step};
    WeightPipe<F, S> pipe{groups + (threadIdx.x / 32) * S * G::WORDS};
    pipe.early(src, ahead);  // S >= 2, cp.async: the first groups fly while the activations are staged
    stage_table<F>(staged);
    const MmaActs xs = stage_acts_mma(X, nchunks, smem);
    __syncthreads();
    uint32_t kv[4];
    frag_table<F>(staged, kv);
    const Tab tab = shared_tab<F>(staged);  // the grid formats' table and byte constants
    pipe.late(src, ahead);  // registers: the first group after the staging, as before
    for (; tile < tiles; tile += tile_step) {
        const int row0 = 16 * tile;
        float acc[8][4];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
        for (int c0 = 8 * q; c0 < nchunks; c0 += 32) {  // warp-uniform: the mma needs the whole warp
            const uint8_t* group = pipe.acquire(src, ahead) + G::head(c0);
            if (F::CHUNKS == 8 || c0 + 8 <= nchunks) {  // a whole group (a super-block always): no per-chunk branch
#pragma unroll
                for (int i = 0; i < 8; ++i) mma_chunk<F>(group, i, c0 + i, xs, kv, tab, acc[i]);
            } else {  // the row's last, partial group (one-chunk formats: nchunks is a multiple of CHUNKS)
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    if (c0 + i < nchunks) mma_chunk<F>(group, i, c0 + i, xs, kv, tab, acc[i]);
            }
        }
        float y[4];
        tile_tree(acc, parts + tg * 3 * 32 * 32, y);
        if (q == 0) {
            const int r0 = row0 + g, r1 = row0 + g + 8;
            if (r0 < rows) {
                Y[(long long)(2 * t) * y_stride + r0] = y[0];
                Y[(long long)(2 * t + 1) * y_stride + r0] = y[1];
            }
            if (r1 < rows) {
                Y[(long long)(2 * t) * y_stride + r1] = y[2];
                Y[(long long)(2 * t + 1) * y_stride + r1] = y[3];
            }
        }
    }
}
