// mmvq.cu: quantized matrix x activation columns, y[c][row] = sum_k W[row][k] * x[c][k], with the
// activations already quantized to q8_1 (quantize_q8_1 in q8_1.cu runs first, in the same launch).
//
// ARITHMETIC CONTRACT (both variants; iq_decode.cuh has the per-chunk part)
//   Row `row`, column `c`: lane l of the row's warp takes chunks l, l+32, l+64, ... in increasing order
//   and does acc = fmaf(dw * d_act, (float)isum, acc) for each, starting from acc = 0.0f. Every term is
//   exact (iq_decode.cuh), so the roundings are exactly: one per chunk (the fmaf's addition), in that
//   order, then the 31 additions of warp_sum_f32's butterfly (xor 16, 8, 4, 2, 1). Lane 0 stores.
//   Nothing else touches the value: no shared-memory partial sums, no atomics.
// Why old and new are bitwise equal: both decode to the same integers (the format's decode; `new` may run
//   one of decoders.cuh's in its place, which give the same Chunk integers or the same dp4a chain ends;
//   the table words are the same in global and shared memory), the same chunk_fma, the same lane -> chunk
//   mapping and chunk order per (row, column), and the same butterfly. `new` only changes which loop is
//   outside: it decodes a chunk once and applies it to NC columns and R rows before moving on, where
//   `old` decodes it again for every column. The per-(row, column) chain of roundings is unchanged.
//   `new` reads the q8_1 blocks from a shared-memory copy split into planes (StagedActs): the same
//   code words bit for bit and the same float(d16), so chunk_isum and chunk_fma see the same inputs.
//   Its L2 prefetches are hints with no result.
// Layout: W rows start 16-byte aligned (row_stride a multiple of 16) and 16 bytes after the last row
//   are readable: the decoders read aligned words around each block. X is [columns][K/32] q8_1 blocks,
//   Y is [columns][rows] float32.
#include "common/decoders.cuh"  // iq_decode.cuh and the decoders new may run in place of a format's own

using namespace siq;

// Blocks per SM the register budget must allow by default: 3 (<= 85 registers, 24 warps) for one
// column, where memory parallelism matters most; 2 (<= 128) for wider passes, which hold R x NC
// accumulators (kernels/constants.py; the family's NewConfig reads the same numbers).
#define MMVQ_NEW_MIN_BLOCKS(NC) ((NC) == 1 ? STRATA_MMVQ_NEW_MIN_BLOCKS_ONE : STRATA_MMVQ_NEW_MIN_BLOCKS_WIDE)

// OLD: one warp per row; for each column in turn the whole row is re-read and every chunk decoded
// again (the format's dot called once per column), tables read from global memory.
template <class F>
__global__ void __launch_bounds__(STRATA_MMVQ_OLD_WARPS * 32)
mmvq_old(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks,
         const block_q8_1* __restrict__ X, int ncols, float* __restrict__ Y) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * STRATA_MMVQ_OLD_WARPS + threadIdx.x / 32;
    if (row >= rows) return;  // whole warps only: rows are per warp
    const LaneWalk<F> walk(lane);
    const uint8_t* wrow = W + row * row_stride + walk.first;
    for (int col = 0; col < ncols; ++col) {
        const block_q8_1* x = X + (long long)col * nchunks;
        float acc = 0.0f;
        for (int c = lane, off = 0; c < nchunks; c += 32, off += LaneWalk<F>::STEP) {
            Chunk ch;
            F::decode(wrow + off, walk.j, global_tab<F>(), ch);
            int q[8];
            const float d_act = load_q8_1(x + c, q);
            acc = chunk_fma(ch, d_act, chunk_isum<F>(ch, q), acc);
        }
        acc = warp_sum_f32(acc);
        if (lane == 0) Y[(long long)col * rows + row] = acc;
    }
}

// How far ahead (in lane steps) a new kernel asks L2 for its rows' weights: a prefetch is a hint (no
// register, no result), issued so that DRAM requests start a whole step of compute earlier than the
// loads that consume them (more bytes in flight per SM: Little's law). 0 turns it off, the default:
// measured on the H200 at 131072 x 8192, 2 steps slowed 1-column calls (iq2_xxs 169.6 -> 175.3 us,
// q8_0 258.6 -> 283.0 us) while the 8-column gains came from the shared-memory activation layout.
#ifndef MMVQ_PREFETCH_STEPS
#define MMVQ_PREFETCH_STEPS 0
#endif

__device__ __forceinline__ void prefetch_l2(const void* p) {
#ifdef __CUDA_ARCH__
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}

// The pass's q8_1 activations as staged in shared memory: three planes instead of 36-byte blocks, so a
// lane reads one block with two 16-byte loads and one 4-byte load (3 LDS instead of 9 LDS.32 and a
// half->float conversion per block and column). Lanes of a warp read consecutive chunks, so each
// plane access is a contiguous 512-byte (or 128-byte) warp access: no bank conflicts. The values are
// the same: qs words copied bit for bit, d converted by the same __half2float load_q8_1 uses.
// Bytes: 36 per block, as before (new_shared_bytes in families/mmvq.py).
struct StagedActs {
    const uint4* lo;  // qs words 0-3 of block i
    const uint4* hi;  // qs words 4-7
    const float* d;   // float(d16)

    __device__ __forceinline__ float load(int i, int q[8]) const {
        const uint4 a = lo[i], b = hi[i];
        q[0] = (int)a.x; q[1] = (int)a.y; q[2] = (int)a.z; q[3] = (int)a.w;
        q[4] = (int)b.x; q[5] = (int)b.y; q[6] = (int)b.z; q[7] = (int)b.w;
        return d[i];
    }
};

// Every thread of the block copies some of the n blocks into the planes (sync before reading).
__device__ __forceinline__ StagedActs stage_acts(const block_q8_1* __restrict__ X, int n, uint32_t* smem) {
    uint4* lo = reinterpret_cast<uint4*>(smem);
    uint4* hi = lo + n;
    float* d = reinterpret_cast<float*>(hi + n);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const uint32_t* src = reinterpret_cast<const uint32_t*>(X + i);
        lo[i] = make_uint4(src[1], src[2], src[3], src[4]);
        hi[i] = make_uint4(src[5], src[6], src[7], src[8]);
        d[i] = __half2float(X[i].d);
    }
    return StagedActs{lo, hi, d};
}

// One lane step of mmvq_new: chunk c of each of the warp's R rows, decoded once and applied to the NC
// columns (each (row, column) chain gets one fmaf, in chunk order); the rows' pointers advance a step.
template <class F, int NC, int R, bool FCVT>
__device__ __forceinline__ void new_step(int c, int nchunks, const LaneWalk<F>& walk, const Tab& tab,
                                         const StagedActs& xs, const uint8_t* (&wr)[R], float (&acc)[R][NC]) {
#if MMVQ_PREFETCH_STEPS > 0
    if (c + 32 * MMVQ_PREFETCH_STEPS < nchunks) {
#pragma unroll
        for (int r = 0; r < R; ++r) prefetch_l2(wr[r] + MMVQ_PREFETCH_STEPS * LaneWalk<F>::STEP);
    }
#endif
    Chunk ch[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        F::decode(wr[r], walk.j, tab, ch[r]);
        wr[r] += LaneWalk<F>::STEP;
    }
#pragma unroll
    for (int col = 0; col < NC; ++col) {
        int q[8];
        const float d_act = xs.load(col * nchunks + c, q);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if constexpr (FCVT)
                acc[r][col] = chunk_fma_f(ch[r], d_act, chunk_isum_f<F>(ch[r], q), acc[r][col]);
            else
                acc[r][col] = chunk_fma(ch[r], d_act, chunk_isum<F>(ch[r], q), acc[r][col]);
        }
    }
}

// NEW: each warp owns R rows; a chunk of each row is decoded once (the table in static shared memory,
// so lookups address it with an immediate offset) and applied to all NC columns of this pass (the
// pass's q8_1 activations in dynamic shared memory as StagedActs planes, staged once per block).
// Blocks loop over row groups so the staging is paid once per block; each row's pointer advances by a
// constant per step, and the rows' blocks MMVQ_PREFETCH_STEPS steps ahead are prefetched into L2.
// Rows past the end are clamped for reading and not stored. The host runs passes of NC = 8, 4, 2, 1
// columns (8 at a time beyond 8).
//
// Launch tuning, none of which touches the arithmetic: MINB is the blocks per SM the register budget
// must allow (__launch_bounds__), U how the chunk loop is unrolled (0: as the compiler chooses; U > 1
// lets it issue the next steps' weight loads before this step's decode, more bytes in flight per warp;
// the chunks still reach each fmaf chain in increasing order), FCVT whether the chunk's integer reaches
// the fmaf through chunk_isum_f (the same float, without I2F or IMAD: iq_decode.cuh) instead of
// (float)chunk_isum. The family's table picks them per format and column pass (families/mmvq.py,
// NEW_CONFIGS).
template <class F, int NC, int R, int MINB = MMVQ_NEW_MIN_BLOCKS(NC), int U = 0, bool FCVT = false>
__global__ void __launch_bounds__(STRATA_MMVQ_NEW_WARPS * 32, MINB)
mmvq_new(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks,
         const block_q8_1* __restrict__ X, float* __restrict__ Y, int y_stride) {
    __shared__ uint32_t staged[SharedTab<F>::WORDS];
    extern __shared__ __align__(16) uint32_t smem[];
    stage_table<F>(staged);
    const StagedActs xs = stage_acts(X, NC * nchunks, smem);
    __syncthreads();
    const Tab tab = shared_tab<F>(staged);

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const LaneWalk<F> walk(lane);
    const int groups = (rows + STRATA_MMVQ_NEW_WARPS * R - 1) / (STRATA_MMVQ_NEW_WARPS * R);
    for (int grp = blockIdx.x; grp < groups; grp += gridDim.x) {
        const int row0 = (grp * STRATA_MMVQ_NEW_WARPS + warp) * R;
        const uint8_t* wr[R];  // the lane's current block in each row
#pragma unroll
        for (int r = 0; r < R; ++r) wr[r] = W + (long long)min(row0 + r, rows - 1) * row_stride + walk.first;
        float acc[R][NC];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int col = 0; col < NC; ++col) acc[r][col] = 0.0f;

        if constexpr (U == 0) {
            for (int c = lane; c < nchunks; c += 32) new_step<F, NC, R, FCVT>(c, nchunks, walk, tab, xs, wr, acc);
        } else {
#pragma unroll U
            for (int c = lane; c < nchunks; c += 32) new_step<F, NC, R, FCVT>(c, nchunks, walk, tab, xs, wr, acc);
        }
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int col = 0; col < NC; ++col) {
                const float v = warp_sum_f32(acc[r][col]);
                if (lane == 0 && row0 + r < rows) Y[(long long)col * y_stride + row0 + r] = v;
            }
    }
}
