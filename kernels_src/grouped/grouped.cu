// grouped.cu: mixture-of-experts FFN over token entries sorted by expert.
//   gate/up: H[i][f] = silu(gate_e[f] . x_i) * (up_e[f] . x_i)      for every entry i of expert e's group
//   down:    Y[i][o] = down_e[o] . q8_1(H_i)
// Groups: entries offsets[e] .. offsets[e+1]-1 belong to expert e (empty groups allowed). Activations
// (x, then H) are quantized to q8_1 per entry row by quantize_q8_1 (q8_1.cu) before each kernel.
// Weights: expert e's matrix starts at e * expert_stride bytes; its rows are row_stride bytes apart
// (a multiple of 16), with 16 readable bytes after the last row (the decoders' aligned loads).
//
// `old` computes every entry's dots separately, decoding each weight chunk again per entry. `new` (promoted
// from experiments/grouped_sched, issue 28 candidate (c)) runs each expert's entries as the columns of
// mmvq_new passes: a weight chunk is decoded once and applied to up to NC entries, with mmvq's StagedActs
// planes (3 LDS a block and entry), 8-warp blocks and a persistent grid over row groups.
//
// ARITHMETIC CONTRACT (both variants). Per output (row f or o, entry i):
//   - each dot (gate_e[f] . x_i, up_e[f] . x_i, down_e[o] . hq_i) is computed exactly as one mmvq output
//     (mmvq.cu): lane l takes chunks l, l+32, ... of the row in increasing order; each chunk is decoded by the
//     format's own decode F::decode (old: the global table; new: the table staged in shared memory, the same
//     words, so the same Chunk integers) and enters acc = fmaf(dw * d_act, (float)isum, acc) from 0.0f
//     (chunk_fma; new with FCVT: chunk_fma_f(chunk_isum_f), the same float isum: iq_decode.cuh);
//   - the activation block's code words and float(d16): old loads them (load_q8_1), new reads mmvq.cu's
//     StagedActs planes (stage_acts copies the words bit for bit and converts d with the same __half2float
//     load_q8_1 uses);
//   - warp_sum_f32's butterfly (xor 16, 8, 4, 2, 1); down: lane 0 stores;
//   - gate/up: both dots of (f, i) are reduced, then silu_mul(g, u) (below, one expression for both variants:
//     (g / (1.0f + expf(-g))) * u, fp32, IEEE division, CUDA's expf, not __expf), stored to H[i][f]. old: lane
//     0 applies it; new: lane col * R + r applies it to output (r, col), since warp_sum_f32 leaves every lane
//     with lane 0's bits. Proof: after the xor-m level, v[l] = v[l] + v[l ^ m] and v[l ^ m] = v[l ^ m] + v[l]
//     are the same two operands in swapped order, equal bits (IEEE addition is commutative; a NaN sum is the
//     canonical NaN on the GPU either way), so after levels 16 .. m the value depends only on l mod m; after
//     level 1, on nothing.
// Why old and new are bitwise equal: new's passes only change which loop is outside (the entries of a pass
//   share each decoded chunk) and which entries share a pass; no (row, entry) chain sees another entry's
//   values, so the chain of roundings is the same as old's for every output. Rows past the end are clamped
//   for reading and never stored; entries past a pass are never computed (each pass has exactly W entries).
//
// new's schedule (per matrix; grid = (x, experts), 8 warps, each warp R rows of each of its matrices):
//   block (x, e) takes expert e's row groups x, x + gridDim.x, ...; the expert's entries are cut into windows
//   of NC (the last one shorter), and a window into passes of NC, else the binary digits of its size (4, 2, 1
//   for NC = 8): mmvq's column_passes, per window. A window is staged into shared memory as StagedActs planes.
//   If the expert has at most NC entries (one window) it is staged once per block, before the row groups (as
//   mmvq_new stages once); otherwise each row group runs every window in turn (restaging it from L2), so the
//   row group's weights are read from DRAM once and re-read from L1/L2 by the later windows.
//   The family (strata_bench/families/grouped.py) picks each matrix's R, NC, MINB, U and FCVT from a table.
#include "mmvq/mmvq.cu"  // StagedActs, stage_acts, new_step, LaneWalk, the formats (iq_decode.cuh), warp_sum_f32

using namespace siq;

// At least 4 blocks per SM (<= 128 registers) for old's 4-warp blocks.
#define GROUPED_MIN_BLOCKS 4
// new's blocks are mmvq_new's.
#define GROUPED_NEW_WARPS STRATA_MMVQ_NEW_WARPS

__device__ __forceinline__ float silu_mul(float g, float u) { return (g / (1.0f + expf(-g))) * u; }

// One warp's dot of a weight row with one q8_1 activation row (the old kernels' building block).
template <class F>
__device__ __forceinline__ float row_dot(const uint8_t* row_lane, const LaneWalk<F>& walk, int nchunks,
                                         const block_q8_1* x, int lane) {
    float acc = 0.0f;
    for (int c = lane, off = 0; c < nchunks; c += 32, off += LaneWalk<F>::STEP) {
        Chunk ch;
        F::decode(row_lane + off, walk.j, global_tab<F>(), ch);
        int q[8];
        const float d_act = load_q8_1(x + c, q);
        acc = chunk_fma(ch, d_act, chunk_isum<F>(ch, q), acc);
    }
    return warp_sum_f32(acc);
}

// OLD gate/up: one warp per (expert, row f); for each entry the gate and up rows are re-read and
// re-decoded. grid = (ceil(d_ff / STRATA_GROUPED_WARPS), n_experts).
template <class F>
__global__ void __launch_bounds__(STRATA_GROUPED_WARPS * 32, GROUPED_MIN_BLOCKS)
grouped_gateup_old(const uint8_t* __restrict__ gate, const uint8_t* __restrict__ up, long long row_stride,
                   long long expert_stride, int d_ff, int nchunks, const int* __restrict__ offsets,
                   const block_q8_1* __restrict__ XQ, float* __restrict__ H) {
    const int lane = threadIdx.x % 32;
    const int e = blockIdx.y;
    const int f = blockIdx.x * STRATA_GROUPED_WARPS + threadIdx.x / 32;
    if (f >= d_ff) return;
    const LaneWalk<F> walk(lane);
    const long long base = e * expert_stride + f * row_stride + walk.first;
    for (int i = offsets[e]; i < offsets[e + 1]; ++i) {
        const block_q8_1* x = XQ + (long long)i * nchunks;
        const float g = row_dot<F>(gate + base, walk, nchunks, x, lane);
        const float u = row_dot<F>(up + base, walk, nchunks, x, lane);
        if (lane == 0) H[(long long)i * d_ff + f] = silu_mul(g, u);
    }
}

// OLD down: one warp per (expert, output row o), one dot per entry.
template <class F>
__global__ void __launch_bounds__(STRATA_GROUPED_WARPS * 32, GROUPED_MIN_BLOCKS)
grouped_down_old(const uint8_t* __restrict__ down, long long row_stride, long long expert_stride, int d_out,
                 int nchunks, const int* __restrict__ offsets, const block_q8_1* __restrict__ HQ,
                 float* __restrict__ Y) {
    const int lane = threadIdx.x % 32;
    const int e = blockIdx.y;
    const int o = blockIdx.x * STRATA_GROUPED_WARPS + threadIdx.x / 32;
    if (o >= d_out) return;
    const LaneWalk<F> walk(lane);
    const uint8_t* row = down + e * expert_stride + o * row_stride + walk.first;
    for (int i = offsets[e]; i < offsets[e + 1]; ++i) {
        const float y = row_dot<F>(row, walk, nchunks, HQ + (long long)i * nchunks, lane);
        if (lane == 0) Y[(long long)i * d_out + o] = y;
    }
}

// The planes of a window staged as stage_acts laid them out for `count` blocks, viewed from entry `koff` on.
__device__ __forceinline__ StagedActs window_view(uint32_t* smem, int count, int koff, int nchunks) {
    const uint4* lo = reinterpret_cast<const uint4*>(smem);
    const uint4* hi = lo + count;
    const float* d = reinterpret_cast<const float*>(hi + count);
    const int off = koff * nchunks;
    return StagedActs{lo + off, hi + off, d + off};
}

// One lane step of a gate/up pass: chunk c of the warp's R gate rows and R up rows, each decoded once and
// applied to the W entries of the pass (every (row, entry) chain gets one fmaf, in chunk order).
template <class F, int W, int R, bool FCVT>
__device__ __forceinline__ void gateup_step(int c, int nchunks, const LaneWalk<F>& walk, const Tab& tab,
                                            const StagedActs& xs, const uint8_t* (&gr)[R], const uint8_t* (&ur)[R],
                                            float (&ag)[R][W], float (&au)[R][W]) {
    Chunk cg[R], cu[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        F::decode(gr[r], walk.j, tab, cg[r]);
        F::decode(ur[r], walk.j, tab, cu[r]);
        gr[r] += LaneWalk<F>::STEP;
        ur[r] += LaneWalk<F>::STEP;
    }
#pragma unroll
    for (int col = 0; col < W; ++col) {
        int q[8];
        const float d_act = xs.load(col * nchunks + c, q);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if constexpr (FCVT) {
                ag[r][col] = chunk_fma_f(cg[r], d_act, chunk_isum_f<F>(cg[r], q), ag[r][col]);
                au[r][col] = chunk_fma_f(cu[r], d_act, chunk_isum_f<F>(cu[r], q), au[r][col]);
            } else {
                ag[r][col] = chunk_fma(cg[r], d_act, chunk_isum<F>(cg[r], q), ag[r][col]);
                au[r][col] = chunk_fma(cu[r], d_act, chunk_isum<F>(cu[r], q), au[r][col]);
            }
        }
    }
}

// A gate/up pass of W entries (entries first .. first + W - 1, their planes at xs) over the warp's R rows.
template <class F, int W, int R, int U, bool FCVT>
__device__ __forceinline__ void gateup_pass(const uint8_t* const (&g0)[R], const uint8_t* const (&u0)[R], int lane,
                                            int nchunks, const LaneWalk<F>& walk, const Tab& tab,
                                            const StagedActs& xs, int row0, int d_ff, int first,
                                            float* __restrict__ H) {
    const uint8_t* gr[R];
    const uint8_t* ur[R];
    float ag[R][W], au[R][W];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        gr[r] = g0[r];
        ur[r] = u0[r];
#pragma unroll
        for (int col = 0; col < W; ++col) ag[r][col] = au[r][col] = 0.0f;
    }
    if constexpr (U == 0) {
        for (int c = lane; c < nchunks; c += 32) gateup_step<F, W, R, FCVT>(c, nchunks, walk, tab, xs, gr, ur, ag, au);
    } else {
#pragma unroll U
        for (int c = lane; c < nchunks; c += 32) gateup_step<F, W, R, FCVT>(c, nchunks, walk, tab, xs, gr, ur, ag, au);
    }
    // Every lane ends warp_sum_f32 with lane 0's bits (below), so lane k = col * R + r takes output (r, col)
    // and the W x R SwiGLUs run side by side, one a lane, instead of one after another on lane 0.
    float gk = 0.0f, uk = 0.0f;
#pragma unroll
    for (int col = 0; col < W; ++col)
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float g = warp_sum_f32(ag[r][col]);
            const float u = warp_sum_f32(au[r][col]);
            if (lane == col * R + r) {
                gk = g;
                uk = u;
            }
        }
    static_assert(W * R <= 32, "one output a lane");
    const int r = lane % R, col = lane / R;
    if (lane < W * R && row0 + r < d_ff) H[(long long)(first + col) * d_ff + row0 + r] = silu_mul(gk, uk);
}

// A down pass of W entries: mmvq_new's step (mmvq.cu's new_step, as it is) over the warp's R rows.
template <class F, int W, int R, int U, bool FCVT>
__device__ __forceinline__ void down_pass(const uint8_t* const (&w0)[R], int lane, int nchunks,
                                          const LaneWalk<F>& walk, const Tab& tab, const StagedActs& xs, int row0,
                                          int d_out, int first, float* __restrict__ Y) {
    const uint8_t* wr[R];
    float acc[R][W];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        wr[r] = w0[r];
#pragma unroll
        for (int col = 0; col < W; ++col) acc[r][col] = 0.0f;
    }
    if constexpr (U == 0) {
        for (int c = lane; c < nchunks; c += 32) new_step<F, W, R, FCVT>(c, nchunks, walk, tab, xs, wr, acc);
    } else {
#pragma unroll U
        for (int c = lane; c < nchunks; c += 32) new_step<F, W, R, FCVT>(c, nchunks, walk, tab, xs, wr, acc);
    }
#pragma unroll
    for (int col = 0; col < W; ++col)
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float v = warp_sum_f32(acc[r][col]);
            if (lane == 0 && row0 + r < d_out) Y[(long long)(first + col) * d_out + row0 + r] = v;
        }
}

// A pass width as a type, so a generic lambda gets it as a compile-time constant.
template <int N>
struct Width {
    static constexpr int value = N;
};

// The passes of one staged window of wn <= NC entries (entries wfirst ..): NC if wn == NC, else the binary
// digits of wn from the largest (mmvq's column_passes). `run(W, koff)` runs a pass of W entries from koff.
template <int NC, class Run>
__device__ __forceinline__ void window_passes(int wn, Run&& run) {
    static_assert(NC == 8 || NC == 4 || NC == 2, "NC: 8, 4 or 2 entries a pass");
    if (wn == NC) {
        run(Width<NC>{}, 0);
        return;
    }
    int koff = 0;
    if constexpr (NC > 4) {
        if (wn & 4) { run(Width<4>{}, koff); koff += 4; }
    }
    if constexpr (NC > 2) {
        if (wn & 2) { run(Width<2>{}, koff); koff += 2; }
    }
    if (wn & 1) run(Width<1>{}, koff);
}

// The passes of one window as window_passes runs them: run(Width<W>{}, koff) is the pass of W entries from
// entry wfirst + koff, on the window's planes viewed from koff. Functors with a template call operator, not
// generic lambdas: NVRTC 13.0 (the H200's 13.0.88) takes a generic lambda nested in a kernel's lambda for a host
// function ("host functions are not allowed in JIT mode"), where 13.5 accepts it; these compile under both.
template <class F, int R, int U, bool FCVT>
struct GateupPasses {
    const uint8_t* const (&g0)[R];
    const uint8_t* const (&u0)[R];
    int lane, nchunks;
    const LaneWalk<F>& walk;
    const Tab& tab;
    uint32_t* smem;
    int wn, row0, d_ff, wfirst;  // wn: the window's entries
    float* __restrict__ H;

    template <class Wd>
    __device__ __forceinline__ void operator()(Wd, int koff) const {
        const StagedActs xs = window_view(smem, wn * nchunks, koff, nchunks);
        gateup_pass<F, Wd::value, R, U, FCVT>(g0, u0, lane, nchunks, walk, tab, xs, row0, d_ff, wfirst + koff, H);
    }
};

template <class F, int R, int U, bool FCVT>
struct DownPasses {
    const uint8_t* const (&w0)[R];
    int lane, nchunks;
    const LaneWalk<F>& walk;
    const Tab& tab;
    uint32_t* smem;
    int wn, row0, d_out, wfirst;
    float* __restrict__ Y;

    template <class Wd>
    __device__ __forceinline__ void operator()(Wd, int koff) const {
        const StagedActs xs = window_view(smem, wn * nchunks, koff, nchunks);
        down_pass<F, Wd::value, R, U, FCVT>(w0, lane, nchunks, walk, tab, xs, row0, d_out, wfirst + koff, Y);
    }
};

// The expert loop shared by both matrices: `group(row0, stage_window)` per row group, where the window loop
// and its staging live (see the schedule above). Returns early for an expert with no entries (whole block).
template <int NC, class Body>
__device__ __forceinline__ void expert_row_groups(const int* __restrict__ offsets, const block_q8_1* __restrict__ X,
                                                  int nchunks, int rows, int R, uint32_t* smem, Body&& body) {
    const int e = blockIdx.y;
    const int begin = offsets[e], end = offsets[e + 1];
    if (end <= begin) return;  // the whole block: no barrier is left waiting
    const bool one_window = end - begin <= NC;
    if (one_window) stage_acts(X + (long long)begin * nchunks, (end - begin) * nchunks, smem);
    __syncthreads();  // the table (and the one window) are staged
    const int groups = (rows + GROUPED_NEW_WARPS * R - 1) / (GROUPED_NEW_WARPS * R);
    for (int grp = blockIdx.x; grp < groups; grp += gridDim.x) {
        const int row0 = (grp * GROUPED_NEW_WARPS + threadIdx.x / 32) * R;
        for (int wfirst = begin; wfirst < end; wfirst += NC) {
            const int wn = min(NC, end - wfirst);
            if (!one_window) {
                __syncthreads();  // every warp is done with the previous window
                stage_acts(X + (long long)wfirst * nchunks, wn * nchunks, smem);
                __syncthreads();
            }
            body(row0, wfirst, wn);
        }
    }
}

// Gate/up with SwiGLU: grid = (x, experts), block 8 warps, dynamic shared NC * nchunks * 36 bytes.
// Arguments as grouped_gateup_old's.
template <class F, int R, int NC, int MINB, int U, bool FCVT>
__global__ void __launch_bounds__(GROUPED_NEW_WARPS * 32, MINB)
grouped_gateup_new(const uint8_t* __restrict__ gate, const uint8_t* __restrict__ up, long long row_stride,
                     long long expert_stride, int d_ff, int nchunks, const int* __restrict__ offsets,
                     const block_q8_1* __restrict__ XQ, float* __restrict__ H) {
    __shared__ uint32_t staged[SharedTab<F>::WORDS];
    extern __shared__ __align__(16) uint32_t smem[];
    stage_table<F>(staged);
    const int lane = threadIdx.x % 32;
    const LaneWalk<F> walk(lane);
    const long long ebase = blockIdx.y * expert_stride + walk.first;
    expert_row_groups<NC>(offsets, XQ, nchunks, d_ff, R, smem, [&](int row0, int wfirst, int wn) {
        const Tab tab = shared_tab<F>(staged);
        const uint8_t* g0[R];
        const uint8_t* u0[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const long long base = ebase + (long long)min(row0 + r, d_ff - 1) * row_stride;
            g0[r] = gate + base;
            u0[r] = up + base;
        }
        window_passes<NC>(wn, GateupPasses<F, R, U, FCVT>{g0, u0, lane, nchunks, walk, tab, smem, wn, row0,
                                                          d_ff, wfirst, H});
    });
}

// Down: grid = (x, experts), block 8 warps, dynamic shared NC * nchunks * 36 bytes. Arguments as
// grouped_down_old's.
template <class F, int R, int NC, int MINB, int U, bool FCVT>
__global__ void __launch_bounds__(GROUPED_NEW_WARPS * 32, MINB)
grouped_down_new(const uint8_t* __restrict__ down, long long row_stride, long long expert_stride, int d_out,
                   int nchunks, const int* __restrict__ offsets, const block_q8_1* __restrict__ HQ,
                   float* __restrict__ Y) {
    __shared__ uint32_t staged[SharedTab<F>::WORDS];
    extern __shared__ __align__(16) uint32_t smem[];
    stage_table<F>(staged);
    const int lane = threadIdx.x % 32;
    const LaneWalk<F> walk(lane);
    const long long ebase = blockIdx.y * expert_stride + walk.first;
    expert_row_groups<NC>(offsets, HQ, nchunks, d_out, R, smem, [&](int row0, int wfirst, int wn) {
        const Tab tab = shared_tab<F>(staged);
        const uint8_t* w0[R];
#pragma unroll
        for (int r = 0; r < R; ++r) w0[r] = down + ebase + (long long)min(row0 + r, d_out - 1) * row_stride;
        window_passes<NC>(wn, DownPasses<F, R, U, FCVT>{w0, lane, nchunks, walk, tab, smem, wn, row0,
                                                        d_out, wfirst, Y});
    });
}
