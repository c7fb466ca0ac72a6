// mmvq_onecol.cu: a one-column mat-vec for the 1-3-bit i-quants that issues fewer instructions per weight than
// mmvq_new's one-column pass: mmvq's `new` runs it for the one-column iq2_xxs and iq1_s passes of tall shapes
// (families/mmvq_onecol.py says where; docs/PERF_NOTES.md v13 has the design and the figures), with the decoders of
// onecol_dec.cuh. Moved verbatim from experiments/mmvq_onecol, whose other decoders run in this same kernel.
//
// ARITHMETIC CONTRACT: mmvq.cu's, unchanged, with mmvq_new<F, 1, R>'s schedule:
//   - lane l of a row's warp takes chunks l, l + 32, ... in increasing order and does
//     acc = fmaf(dw * d_act, (float)isum, acc) from acc = 0.0f, with the format's exact chunk integer isum
//     (onecol_dec.cuh: the same integer, summed by dp4a in any order) and dw * d_act as the float
//     d * (d_act * 2^-k), exactly the product of old's dw = d * 2^-k and d_act (onecol_dec.cuh says why);
//   - then warp_sum_f32's butterfly (xor 16, 8, 4, 2, 1); lane 0 stores rows below `rows`; rows past the end
//     are clamped for reading, never stored. No shared-memory partial sums, no atomics.
// So every output has old's bits; parity checks every variant against old.
//
// The activations: the q8_1 codes as mmvq_new stages them (two 16-byte planes), and a third plane with
// float(d16) * D_ACT_SCALE (and for a decoder with CODE_SUM, CODE_SUM_FACTOR times the sum of the block's 32 codes,
// as an int beside it: one 8-byte load). The codes in the decoder's byte order within each group (ActPairs: old's
// order but for Iq2xxsMul7's).
// Layout and launch: mmvq_new's ABI (W rows 16-byte aligned, 16 readable bytes after the last row, X as
// [1][K/32] q8_1 blocks, Y [1][rows]); 8 warps a block, R rows a warp, blocks loop over row groups.
#include "mmvq/onecol_dec.cuh"  // LaneConst, ActPairs, the decoders
#include "mmvq/onecol_dec_iq1m.cuh"  // iq1_m's (Iq1mSel)

using namespace siq;
using onecol::LaneConst;

// The staged activations of the one column: codes in two planes, the scale (and code sum) in a third.
template <class D>
struct OneColActs {
    const uint4* lo;  // code words 0-3 of block i
    const uint4* hi;  // code words 4-7
    const uint2* ds;  // x: float(d16) * D_ACT_SCALE as bits; y: CODE_SUM_FACTOR * sum of the codes (CODE_SUM only)
    const float* d;   // the same scale as a float plane (without CODE_SUM)

    __device__ __forceinline__ float load(int i, int q[8], int& code_sum2) const {
        const uint4 a = lo[i], b = hi[i];
        q[0] = (int)a.x; q[1] = (int)a.y; q[2] = (int)a.z; q[3] = (int)a.w;
        q[4] = (int)b.x; q[5] = (int)b.y; q[6] = (int)b.z; q[7] = (int)b.w;
        if constexpr (D::CODE_SUM) {
            const uint2 s = ds[i];
            code_sum2 = (int)s.y;
            return __int_as_float((int)s.x);
        } else {
            code_sum2 = 0;
            return d[i];
        }
    }
};

// Dynamic shared bytes per activation block: 32 of codes, then 8 (scale and code sum) or 4 (scale).
template <class D>
struct OneColActBytes {
    static constexpr int VALUE = 32 + (D::CODE_SUM ? 8 : 4);
};

// Every thread of the block stages some of the n blocks (sync before reading).
template <class D>
__device__ __forceinline__ OneColActs<D> stage_onecol_acts(const block_q8_1* __restrict__ X, int n, uint32_t* smem) {
    uint4* lo = reinterpret_cast<uint4*>(smem);
    uint4* hi = lo + n;
    uint2* ds = reinterpret_cast<uint2*>(hi + n);
    float* d = reinterpret_cast<float*>(hi + n);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const uint32_t* src = reinterpret_cast<const uint32_t*>(X + i);
        uint32_t w[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) w[k] = src[1 + k];
        onecol::ActPairs<D>::apply(w);  // the decoder's byte order within each group (Iq2xxsMul7), else as is
        lo[i] = make_uint4(w[0], w[1], w[2], w[3]);
        hi[i] = make_uint4(w[4], w[5], w[6], w[7]);
        const float scale = __half2float(X[i].d) * D::D_ACT_SCALE;  // exact: a power of two, no underflow
        if constexpr (D::CODE_SUM) {
            int sum = 0;
#pragma unroll
            for (int w = 1; w <= 8; ++w) sum = __dp4a((int)src[w], 0x01010101, sum);
            ds[i] = make_uint2((uint32_t)__float_as_int(scale), (uint32_t)(D::CODE_SUM_FACTOR * sum));
        } else {
            d[i] = scale;
        }
    }
    return OneColActs<D>{lo, hi, ds, d};
}

// One lane step: chunk c of each of the warp's R rows (loads first, then the dots), one fmaf per row.
template <class D, int R>
__device__ __forceinline__ void onecol_step(int c, const OneColActs<D>& xs, const uint32_t* tabs, uint32_t shift,
                                            const LaneConst& lc, typename D::Ptr (&p)[R], float (&acc)[R]) {
    typename D::Raw raw[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        raw[r] = p[r].load(shift);
        p[r].advance();
    }
    int q[8], code_sum2;
    const float d_act = xs.load(c, q, code_sum2);
#pragma unroll
    for (int r = 0; r < R; ++r)
        acc[r] = fmaf(D::d(raw[r]) * d_act, (float)D::isum(tabs, raw[r], lc, q, code_sum2), acc[r]);
}

template <class D, int R, int MINB, int U>
__global__ void __launch_bounds__(STRATA_MMVQ_NEW_WARPS * 32, MINB)
mmvq_onecol(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks,
            const block_q8_1* __restrict__ X, float* __restrict__ Y, int y_stride) {
    __shared__ __align__(16) uint32_t tabs[D::SHARED_WORDS];
    extern __shared__ __align__(16) uint32_t smem[];
    D::stage(tabs, threadIdx.x, blockDim.x);
    const OneColActs<D> xs = stage_onecol_acts<D>(X, nchunks, smem);
    __syncthreads();

    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    const LaneWalk<typename D::F> walk(lane);
    const uint32_t shift = D::shift(W + walk.first, walk.j);  // the same in every row: rows are 16-byte aligned
    const LaneConst lc = D::lane_const(tabs, lane);
    const int groups = (rows + STRATA_MMVQ_NEW_WARPS * R - 1) / (STRATA_MMVQ_NEW_WARPS * R);
    for (int grp = blockIdx.x; grp < groups; grp += gridDim.x) {
        const int row0 = (grp * STRATA_MMVQ_NEW_WARPS + warp) * R;
        typename D::Ptr p[R];
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            p[r] = typename D::Ptr(W + (long long)min(row0 + r, rows - 1) * row_stride + walk.first, walk.j);
            acc[r] = 0.0f;
        }
#pragma unroll U
        for (int c = lane; c < nchunks; c += 32) onecol_step<D, R>(c, xs, tabs, shift, lc, p, acc);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float v = warp_sum_f32(acc[r]);
            if (lane == 0 && row0 + r < rows) Y[row0 + r] = v;
        }
    }
}
