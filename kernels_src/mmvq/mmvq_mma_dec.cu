// mmvq_mma_dec.cu: mmvq over 8 activation columns with the chunk integers from tensor-core mma, for every
// format mmvq has: the A fragments come from the format's own full F::decode (iq_decode.cuh), left by the
// lanes in a per-warp shared tile (mma_dec_tile.cuh), so there is no per-format code. Inputs, outputs
// and layout as mmvq_mma.cu (mmvq_new<F, 8, ...>): W rows 16-byte aligned with 16 readable bytes after the
// last row, X is [8][K/32] q8_1 blocks (already quantized), Y is [8][y_stride] float32.
//
// ARITHMETIC CONTRACT (mmvq_mma.cu's, kept; iq_decode.cuh has the per-chunk part)
//   Output (row, column): virtual lane v = 0..31 takes chunks v, v+32, ... in increasing order with
//   acc_v = fmaf(dw * d_act, isum, acc_v) from 0.0f, isum the float of chunk_isum<F>'s integer; the 32
//   acc_v are added with warp_sum_f32's tree at lane 0 (tile_tree, mma_common.cuh). Hence the bits of
//   mmvq_old / mmvq_new, because every input of every rounding is the same:
//   - the integers: chunk (row, c) is F::decode of block c / F::CHUNKS, sub-chunk c % F::CHUNKS of the
//     row, as old's LaneWalk reaches it (the table staged in shared memory: the same words). Its w[8],
//     dw, ls0, ls1 go to the tile bit for bit (ls as its exact float) and ldmatrix.x4 returns to lane
//     4g + t words t and 4 + t of rows g and g + 8: the m16n8k32 A fragment (MmaDecTile::ldmatrix_row);
//     B is the q8_1 words t and 4 + t of column g (MmaActs, as mmvq_mma). Integer sums are exact in any
//     order (|partial| < 2^22), so:
//       ONE_SCALE: one mma.m16n8k32 s8 gives C = sum_k w q; isum = fmaf(1.5*2^23 + C, ls0, -1.5*2^23 ls0)
//         = ls0 * C (isum_float, chunk_isum_f's argument), the float of c.ls0 * chain;
//       two scales (iq2_xs, iq2_s, iq1_m): two mma.m16n8k16 s8, {a0, a1} x b0 (values 0-15) and
//         {a2, a3} x b1 (values 16-31) give s0 and s1, each started at 1.5 * 2^23; isum =
//         fmaf(s0', ls0, -B ls0) + fmaf(s1', ls1, -B ls1): both products and their sum are integers
//         below 2^24, so the float equals (float)(ls0 * s0 + ls1 * s1) = (float)chunk_isum<F>.
//   - dw * d_act and the fmaf: the same dw (copied), the same __half2float d_act, the same operations.
//   - the chains and the tree: mmvq_mma.cu's schedule unchanged (warp q of a tile owns v = 8q + i and
//     walks c = 32s + 8q + i in increasing s; tile_tree splits the butterfly across the 4 warps).
//   tests/iq_host/mma_dec_emul.h runs this schedule (the tile's offsets, ldmatrix's lane mapping, both mma
//   shapes) on the CPU; tests/families/test_mmvq_mma_dec.py checks it bitwise against the dot mode for
//   every format.
// Schedule: as mmvq_mma (TG tile groups of 4 warps per persistent block, one 16-row tile per group, the 8
//   columns' activations staged once per block), except how the weights reach the mma: per 8-chunk group
//   lane l decodes the row-chunks (row 4 (l / 8) + j, chunk c0 + l % 8), j = 0..3, straight from global
//   memory (8 lanes cover one or more whole blocks of a row: coalesced), writes them to its warp's tile
//   (__syncwarp), and every lane reads its fragments back with ldmatrix.x4 and LDS (conflict-free:
//   mma_dec_tile.cuh). Rows past the end are clamped for reading and not stored; chunks past the row's
//   end (the last group of a K not a multiple of 256) are neither decoded nor multiplied.
//   PF = 1 first asks L2 for the warp's next group (prefetch_group: hints, no register, no result), so that
//   the decode's loads, which the warp waits on before its mma, wait on L2 rather than DRAM.
#include "mmvq/mma_common.cuh"  // MmaActs, stage_acts_mma, mma_s8, group_sync, tile_tree, isum_float
#include "mmvq/mma_dec_tile.cuh"

using namespace siq;

// One m16n8k16 s8 mma, D = A B + C, C = `init` in every element (A: rows g, g + 8 at k 4t..4t+3).
__device__ __forceinline__ void mma_s8_k16(int a0, int a1, int b, int init, int (&d)[4]) {
#ifdef STRATA_MMA_DEVICE
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
                 "{%7,%7,%7,%7};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b), "r"(init));
#elif defined(__CUDA_ARCH__)
    __trap();
#endif
}

__device__ __forceinline__ void ldmatrix_x4(const uint8_t* p, int (&a)[4]) {
#ifdef __CUDA_ARCH__
    const unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(addr)
                 : "memory");
#endif
}

// The lane's 4 row-chunks of warp q's group at chunk c0 (rows 4 (lane / 8) + j, chunk c0 + lane % 8),
// decoded by the format's decode and stored as MmaDecTile records.
template <class F>
__device__ __forceinline__ void decode_group(const uint8_t* __restrict__ W, long long row_stride, int rows, int row0,
                                             int c0, int nchunks, const Tab& tab, uint8_t* tile) {
    const int lane = threadIdx.x % 32, i = lane % 8, c = c0 + i;
    if (c >= nchunks) return;  // no chunk there: never multiplied (the last, partial group)
    const int off = (c / F::CHUNKS) * F::BYTES, j = c % F::CHUNKS;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int r = 4 * (lane / 8) + k;
        Chunk ch;
        F::decode(W + (long long)min(row0 + r, rows - 1) * row_stride + off, j, tab, ch);
        uint4* rec = reinterpret_cast<uint4*>(tile + MmaDecTile::rec(i, r));
        rec[0] = make_uint4(ch.w[0], ch.w[1], ch.w[2], ch.w[3]);
        rec[1] = make_uint4(ch.w[4], ch.w[5], ch.w[6], ch.w[7]);
        rec[2] = make_uint4(__float_as_uint(ch.dw), __float_as_uint((float)ch.ls0), __float_as_uint((float)ch.ls1), 0u);
    }
}

// The L2 prefetch of the lane's 4 row-chunks of the group at (row0, c0), where decode_group will read them
// (F::decode reads its block's fields from about there: a sub-chunk's bytes start near j * BYTES / CHUNKS).
template <class F>
__device__ __forceinline__ void prefetch_group(const uint8_t* __restrict__ W, long long row_stride, int rows,
                                               int row0, int c0, int nchunks) {
    const int lane = threadIdx.x % 32, c = c0 + lane % 8;
    if (c >= nchunks) return;
    const int off = (c / F::CHUNKS) * F::BYTES + (c % F::CHUNKS) * F::BYTES / F::CHUNKS;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const uint8_t* p = W + (long long)min(row0 + 4 * (lane / 8) + k, rows - 1) * row_stride + off;
#ifdef __CUDA_ARCH__
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
    }
}

// isum's float from an mma integer started at MMA_MAGIC and its scale's exact float (isum_float's form).
__device__ __forceinline__ float scaled(int d, float ls) { return fmaf(__int_as_float(d), ls, -MMA_BIAS * ls); }

// Chunk i (chunk index c) of the tile for the lane's 4 outputs (rows g, g, g+8, g+8; columns 2t, 2t+1).
template <class F>
__device__ __forceinline__ void mma_dec_chunk(const uint8_t* tile, int i, int c, const MmaActs& xs, float (&acc)[4]) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int a[4];
    ldmatrix_x4(tile + MmaDecTile::ldmatrix_row(i, lane), a);
    const float4 s0 = *reinterpret_cast<const float4*>(tile + MmaDecTile::rec(i, g) + MmaDecTile::SCALES);
    const float4 s1 = *reinterpret_cast<const float4*>(tile + MmaDecTile::rec(i, g + 8) + MmaDecTile::SCALES);
    const int b[2] = {(int)xs.q[64 * c + 8 * t + g], (int)xs.q[64 * c + 32 + 8 * t + g]};
    const float2 d = *reinterpret_cast<const float2*>(xs.d + 8 * c + 2 * t);
    float isum[4];
    if constexpr (F::ONE_SCALE) {
        int cm[4];
        mma_s8(a, b, MMA_MAGIC, cm);
        isum[0] = scaled(cm[0], s0.y);
        isum[1] = scaled(cm[1], s0.y);
        isum[2] = scaled(cm[2], s1.y);
        isum[3] = scaled(cm[3], s1.y);
    } else {
        int lo[4], hi[4];
        mma_s8_k16(a[0], a[1], b[0], MMA_MAGIC, lo);  // values 0-15
        mma_s8_k16(a[2], a[3], b[1], MMA_MAGIC, hi);  // values 16-31
        isum[0] = scaled(lo[0], s0.y) + scaled(hi[0], s0.z);
        isum[1] = scaled(lo[1], s0.y) + scaled(hi[1], s0.z);
        isum[2] = scaled(lo[2], s1.y) + scaled(hi[2], s1.z);
        isum[3] = scaled(lo[3], s1.y) + scaled(hi[3], s1.z);
    }
    acc[0] = fmaf(s0.x * d.x, isum[0], acc[0]);
    acc[1] = fmaf(s0.x * d.y, isum[1], acc[1]);
    acc[2] = fmaf(s1.x * d.x, isum[2], acc[2]);
    acc[3] = fmaf(s1.x * d.y, isum[3], acc[3]);
}

// TG: tile groups per block (4 warps each), MINB: blocks per SM the register budget must allow, as in
// mmvq_mma; PF: whether the next group is prefetched into L2. None touches the arithmetic.
template <class F, int TG = 4, int MINB = 1, int PF = 0>
__global__ void __launch_bounds__(128 * TG, MINB)
mmvq_mma_dec(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks,
             const block_q8_1* __restrict__ X, float* __restrict__ Y, int y_stride) {
    __shared__ uint32_t staged[SharedTab<F>::WORDS];
    // Dynamic: the activations (72 words per chunk), each warp's MmaDecTile, each tile group's tile_tree
    // operands (scripts/mmvq_mma_dec.py, MmaDecPass.shared_bytes, adds them up for the launch).
    extern __shared__ __align__(16) uint32_t smem[];
    uint8_t* const tiles = reinterpret_cast<uint8_t*>(smem + 72 * nchunks);
    float* const parts = reinterpret_cast<float*>(tiles + 4 * TG * MmaDecTile::BYTES);
    stage_table<F>(staged);
    const MmaActs xs = stage_acts_mma(X, nchunks, smem);
    __syncthreads();
    const Tab tab = shared_tab<F>(staged);

    const int lane = threadIdx.x % 32, q = (threadIdx.x / 32) % 4, tg = threadIdx.x / 128, g = lane / 4, t = lane % 4;
    uint8_t* const tile_buf = tiles + (threadIdx.x / 32) * MmaDecTile::BYTES;
    const int tiles_n = (rows + 15) / 16, tile_step = gridDim.x * TG;
    for (int tile = blockIdx.x * TG + tg; tile < tiles_n; tile += tile_step) {
        const int row0 = 16 * tile;
        float acc[8][4];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][e] = 0.0f;
        for (int c0 = 8 * q; c0 < nchunks; c0 += 32) {  // warp-uniform: the mma needs the whole warp
            if constexpr (PF) {  // the next group of this tile, else the first of the next tile
                if (c0 + 32 < nchunks)
                    prefetch_group<F>(W, row_stride, rows, row0, c0 + 32, nchunks);
                else if (tile + tile_step < tiles_n)
                    prefetch_group<F>(W, row_stride, rows, row0 + 16 * tile_step, 8 * q, nchunks);
            }
            __syncwarp();  // the previous group's reads are done
            decode_group<F>(W, row_stride, rows, row0, c0, nchunks, tab, tile_buf);
            __syncwarp();
            if (c0 + 8 <= nchunks) {  // a whole group: no per-chunk branch
#pragma unroll
                for (int i = 0; i < 8; ++i) mma_dec_chunk<F>(tile_buf, i, c0 + i, xs, acc[i]);
            } else {  // the row's last, partial group
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    if (c0 + i < nchunks) mma_dec_chunk<F>(tile_buf, i, c0 + i, xs, acc[i]);
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
