// mmvq_coal.cu: mmvq_new's one-column pass with the weights copied coalesced (issue 28, candidate (a)).
//
// ARITHMETIC CONTRACT: mmvq.cu's, unchanged, and mmvq_new<D, 1, R, MINB, U, FCVT>'s schedule exactly:
//   - the same decoder D (a format or a decoders.cuh decoder), so the same Chunk integers from the same
//     bytes: the decoder reads a shared-memory copy of the row bytes it would read from global memory, at the
//     same 16-byte phase (every aligned word, u16 and byte it loads is the same value);
//   - lane l takes chunks l, l+32, ... of each of its warp's R rows in increasing order, one chunk_fma (or
//     chunk_fma_f with FCVT: the same float) per chunk into acc starting at 0.0f;
//   - the activations from the same StagedActs planes (mmvq.cu's stage_acts);
//   - warp_sum_f32's butterfly, lane 0 stores rows below `rows`; rows past the end are clamped for reading.
//   What changes is only where the decode's bytes come from, so every output keeps its bits (parity checks
//   every variant against old).
//
// Why (docs/PERF_NOTES.md v7): at one column the L1/TEX unit is 95% busy; the weight loads request each sector
// about 4 times (each lane reads a few bytes of its block with 4- and 2-byte loads: 66% excess global sectors).
// Here each step a warp copies the 16-byte granules that cover its R rows' 32-chunk segments with one
// LDG.128 per granule (each sector requested once), one step ahead in registers, into a per-warp shared
// buffer; the decoders then read it with LDS.
//
// How the decoders' loads become shared loads: this compile unit defines __ldg (after the CUDA headers and
// before the decoders' headers) as a load from the shared array at the pointer's shared offset
// (coal_shared_load); the decoders' plain loads are derived from the shared buffer and inlined, so NVVM's
// address-space inference makes them ld.shared too (checked in the PTX: experiments/mmvq_coal/tests). The
// granule copy keeps the real __ldg (coal_ldg_granule, defined
// before the macro). Only the formats whose decode reads inside its block's covering granules are listed
// (CoalSeg's static_assert; the Python planner mirrors it): iq3_xxs and iq3_s (ld_words_a2, ld_u32_a2,
// ld_half, ld_u8 over fields that end inside the block).
#include "common/strata_common.cuh"

// The real read-only global load of one 16-byte granule (the macro below replaces __ldg after this point).
__device__ __forceinline__ uint4 coal_ldg_granule(const uint4* p) { return __ldg(p); }

// Every __ldg of the decoders in this compile unit reads the shared copy: the load of the same bytes from the
// dynamic shared array (all extern __shared__ arrays of a kernel start at one address). ld_words_a2 rounds its
// pointer down through an integer, which hides the address space from NVVM, so the offset is taken with
// cvta.to.shared and added back to the shared array: an ld.shared, not a generic ld (checked in the PTX).
extern __shared__ __align__(16) uint32_t coal_dynamic_shared[];
template <class T>
__device__ __forceinline__ T coal_shared_load(const T* p) {
    const size_t off = __cvta_generic_to_shared(p) - __cvta_generic_to_shared(coal_dynamic_shared);
    return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(coal_dynamic_shared) + off);
}
#define __ldg coal_shared_load

#include "mmvq/mmvq.cu"  // StagedActs, stage_acts, the decoders (reading through the macro), LaneWalk

using namespace siq;

// The geometry of one lane step of a row (experiments/mmvq_coal/cases.py's coal_geometry mirrors it; its
// tests check both): the 32 chunks of a step are STEP bytes from byte s * STEP of the row. Rows start 16-byte
// aligned, so the step's phase (s * STEP) % 16 is a multiple of PHASE_UNIT, at most MAX_PHASE, and GRANULES
// 16-byte granules cover any step.
template <class F>
struct CoalSeg {
    static constexpr int STEP = LaneWalk<F>::STEP;
    static constexpr int LOW_BIT = STEP & -STEP;
    static constexpr int PHASE_UNIT = LOW_BIT < 16 ? LOW_BIT : 16;
    static constexpr int MAX_PHASE = 16 - PHASE_UNIT;
    static constexpr int GRANULES = (MAX_PHASE + STEP + 15) / 16;
};

// The warp's R rows x GRANULES granules of one step, spread over its 32 lanes: slot i of lane l is granule
// k = l + 32 i (row k / GRANULES, granule k % GRANULES), stored at buffer granule k. SLOTS per lane.
template <class F, int R>
struct CoalCopy {
    static constexpr int G = CoalSeg<F>::GRANULES;
    static constexpr int SLOTS = (R * G + 31) / 32;
    static constexpr int BUF_GRANULES = R * G;  // one buffer of a warp
};

// The per-row-group state of a warp's walk (mmvq_coal's loop, split out so that a step's phase and buffer are
// compile-time constants: PAR, the step's parity).
template <class F, int R, int NB>
struct CoalWalk {
    using Copy = CoalCopy<F, R>;
    static constexpr int STEP = CoalSeg<F>::STEP, G = Copy::G, SLOTS = Copy::SLOTS;
    static_assert(STEP % 8 == 0, "a step's phase must follow its parity: (s * STEP) % 16 == (s % 2) * (STEP % 16)");
    const uint8_t* src[SLOTS];  // the slot's granule 0 of its (clamped) row; idle slots: row R - 1's
    bool live[SLOTS];           // the slot holds a granule (lane + 32 i < R x G)
    int granule[SLOTS];
    uint4 next[SLOTS];          // the next step's granules, in flight
    uint4* bufs;                // this warp's NB buffers of R x G granules
    int lane, full, steps, row_bytes, nchunks;

    // Step n's granules into `next`: every slot for a whole step, only those covering the row's bytes for
    // the short last one.
    __device__ __forceinline__ void fetch(int n) {
        const int start = n * STEP;
        if (n < full) {
#pragma unroll
            for (int i = 0; i < SLOTS; ++i)
                if (live[i]) next[i] = coal_ldg_granule(reinterpret_cast<const uint4*>(src[i] + (start & ~15)));
        } else if (n < steps) {
            const int covered = ((start & 15) + (row_bytes - start) + 15) >> 4;
#pragma unroll
            for (int i = 0; i < SLOTS; ++i)
                if (live[i] && granule[i] < covered)
                    next[i] = coal_ldg_granule(reinterpret_cast<const uint4*>(src[i] + (start & ~15)));
        }
    }

    // Step s (parity PAR): store its granules, fetch step s + 1, decode chunk lane + 32 s of each row from the
    // copy (TAIL: only lanes whose chunk exists) into acc, in the order mmvq_new does.
    template <bool FCVT, int PAR, bool TAIL>
    __device__ __forceinline__ void step(int s, const LaneWalk<F>& walk, const Tab& tab, const StagedActs& xs,
                                         float (&acc)[R]) {
        uint4* const buf = bufs + (NB == 2 ? PAR * Copy::BUF_GRANULES : 0);
#pragma unroll
        for (int i = 0; i < SLOTS; ++i)
            if (lane + 32 * i < Copy::BUF_GRANULES) buf[lane + 32 * i] = next[i];
        __syncwarp();
        fetch(s + 1);  // in flight during this step's decode
        const int c = lane + 32 * s;
        if (!TAIL || c < nchunks) {
            const uint8_t* const seg = reinterpret_cast<const uint8_t*>(buf) + ((PAR * STEP) & 15) + walk.first;
            Chunk ch[R];
#pragma unroll
            for (int r = 0; r < R; ++r) F::decode(seg + r * G * 16, walk.j, tab, ch[r]);
            int q[8];
            const float d_act = xs.load(c, q);
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if constexpr (FCVT)
                    acc[r] = chunk_fma_f(ch[r], d_act, chunk_isum_f<F>(ch[r], q), acc[r]);
                else
                    acc[r] = chunk_fma(ch[r], d_act, chunk_isum<F>(ch[r], q), acc[r]);
            }
        }
        if (NB == 1) __syncwarp();  // every lane done reading before the next store
    }
};

// NB buffers per warp: 1 (a second __syncwarp per step before the next store) or 2 (the step's store goes to
// the other buffer, which every lane finished reading before the last step's __syncwarp). U unrolls the loop
// over pairs of whole steps (0: the compiler's choice); a short last step runs once after it.
template <class F, int R, int MINB, int U, bool FCVT, int NB>
__global__ void __launch_bounds__(STRATA_MMVQ_NEW_WARPS * 32, MINB)
mmvq_coal(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks,
          const block_q8_1* __restrict__ X, float* __restrict__ Y, int y_stride) {
    static_assert(NB == 1 || NB == 2, "one or two buffers per warp");
    static_assert(F::QK % 32 == 0 && 32 % F::CHUNKS == 0, "whole chunks per block, whole blocks per step");
    using Walk = CoalWalk<F, R, NB>;
    constexpr int G = Walk::G, SLOTS = Walk::SLOTS;

    __shared__ uint32_t staged[SharedTab<F>::WORDS];
    extern __shared__ __align__(16) uint32_t smem[];
    stage_table<F>(staged);
    const StagedActs xs = stage_acts(X, nchunks, smem);
    __syncthreads();
    const Tab tab = shared_tab<F>(staged);

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const LaneWalk<F> walk(lane);
    const int groups = (rows + STRATA_MMVQ_NEW_WARPS * R - 1) / (STRATA_MMVQ_NEW_WARPS * R);
    Walk w;
    // The warp's buffers after the activation planes (36 bytes a block, rounded up to 16 bytes).
    w.bufs = reinterpret_cast<uint4*>(smem + ((9 * nchunks + 3) & ~3)) + warp * NB * Walk::Copy::BUF_GRANULES;
    w.lane = lane;
    w.nchunks = nchunks;
    w.full = nchunks / 32;
    w.steps = (nchunks + 31) / 32;
    w.row_bytes = (nchunks / F::CHUNKS) * F::BYTES;
    int slot_row[SLOTS];  // slot i is granule k = lane + 32 i: row k / G, granule k % G
#pragma unroll
    for (int i = 0; i < SLOTS; ++i) {
        const int k = lane + 32 * i;
        slot_row[i] = min(k / G, R - 1);
        w.live[i] = k < R * G;
        w.granule[i] = k - (k / G) * G;
        w.next[i] = make_uint4(0u, 0u, 0u, 0u);  // slots never fetched store zeros
    }

    for (int grp = blockIdx.x; grp < groups; grp += gridDim.x) {
        const int row0 = (grp * STRATA_MMVQ_NEW_WARPS + warp) * R;
#pragma unroll
        for (int i = 0; i < SLOTS; ++i)
            w.src[i] = W + (long long)min(row0 + slot_row[i], rows - 1) * row_stride + 16 * w.granule[i];
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = 0.0f;

        w.fetch(0);
        int s = 0;
        if constexpr (U == 0) {
            for (; s + 1 < w.full; s += 2) {
                w.template step<FCVT, 0, false>(s, walk, tab, xs, acc);
                w.template step<FCVT, 1, false>(s + 1, walk, tab, xs, acc);
            }
        } else {
#pragma unroll U
            for (; s + 1 < w.full; s += 2) {
                w.template step<FCVT, 0, false>(s, walk, tab, xs, acc);
                w.template step<FCVT, 1, false>(s + 1, walk, tab, xs, acc);
            }
        }
        if (s < w.full) w.template step<FCVT, 0, false>(s++, walk, tab, xs, acc);  // s was even
        if (s < w.steps) {  // the short last step
            if (s & 1)
                w.template step<FCVT, 1, true>(s, walk, tab, xs, acc);
            else
                w.template step<FCVT, 0, true>(s, walk, tab, xs, acc);
        }
        // The next row group's first store overwrites buffer 0 (NB == 2: maybe read at this group's last step).
        if (NB == 2) __syncwarp();
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float v = warp_sum_f32(acc[r]);
            if (lane == 0 && row0 + r < rows) Y[row0 + r] = v;
        }
    }
}
