// moe_combine.cu: MoE combine + residual update + RMS norm of the mixed residual.
// old: two kernels (combine and residual write, then the norm reading the residual back); new: fused.
//
// SEMANTICS, per token t (H = hidden size, K = top-k, 4 residual rows):
//   c = sum_k w[t,k] * Y[t,k,:] + S[t,:]
//   Rout[r,t,:] = Rin[r,t,:] + beta[r,t] * c                       (r = 0..3)
//   x = sum_r alpha[r,t] * Rout[r,t,:]
//   rs[t] = 1 / sqrt(mean(x^2) + eps)
//   xn16 = fp16(x * rs * g);   xn16_lo = fp16(x * rs * g - float(xn16))   (optional)
// Rout may alias Rin (an engine updates the residual in place: every element is read and then written
// by the same thread); the harness passes separate buffers so each launch is idempotent.
//
// ARITHMETIC CONTRACT (fp32, explicit intrinsics, so no contraction or reassociation):
//   element i:  c = __fmul_rn(w0, Y0); c = __fmaf_rn(wk, Yk, c) for k = 1..K-1; c = __fadd_rn(c, S)
//               Rr = __fmaf_rn(beta_r, c, Rin_r)
//               x = __fmul_rn(alpha_0, R0); x = __fmaf_rn(alpha_r, Rr, x) for r = 1..3
//   sum of squares, fixed order: a token is one 256-thread block; thread j owns elements
//               i = j + 256*m (m = 0..H/256-1) and accumulates a = __fmaf_rn(x_i, x_i, a) from a = +0
//               in increasing m; warp_sum_f32 (butterfly 16, 8, 4, 2, 1) in each warp; thread 0 adds the
//               eight warp sums left to right (__fadd_rn).
//   rs = __frsqrt_rn(__fadd_rn(__fdiv_rn(sum, (float)H), eps))   (correctly rounded 1/sqrt)
//   y = __fmul_rn(__fmul_rn(x, rs), g_i);  xn16 = __float2half_rn(y);
//   xn16_lo = __float2half_rn(__fsub_rn(y, __half2float(xn16)))   (y - xn16 is exact in fp32)
//   Why old and new are bitwise equal: they run these operations on the same operands in the same
//   order with the same thread-to-element map and reduction tree; old stores Rr and reloads it (and
//   recomputes x from it in its second pass), new keeps Rr and x in registers. Same floats either way.
//
// LAYOUT (float32 unless noted; ld = token stride in elements, >= H, padding never written):
//   w[t*K + k]; Y[(t*K + k)*ld + i]; S[t*ld + i]; Rin/Rout[(r*T + t)*ld + i]; beta, alpha[r*T + t];
//   g[i]; rs[t]; xn16, xn16_lo[t*ld + i] (fp16). H must be a multiple of 256.
#include "common/strata_common.cuh"

namespace moe {

constexpr int kThreads = STRATA_MOE_THREADS;
constexpr int kWarps = kThreads / 32;
constexpr int kResidual = STRATA_MOE_RESIDUAL_ROWS;

__device__ __forceinline__ float combine_at(const float* Yt, const float* wk, int K, long long ld, float s, int i) {
    float c = __fmul_rn(wk[0], Yt[i]);
    for (int k = 1; k < K; ++k) c = __fmaf_rn(wk[k], Yt[k * ld + i], c);
    return __fadd_rn(c, s);
}

// The token's rs from each thread's partial sum of squares (contract order); every thread gets it.
__device__ __forceinline__ float block_rs(float acc, int H, float eps) {
    __shared__ float part[kWarps];
    __shared__ float rs_shared;
    acc = warp_sum_f32(acc);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float tot = part[0];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) tot = __fadd_rn(tot, part[w]);
        rs_shared = __frsqrt_rn(__fadd_rn(__fdiv_rn(tot, (float)H), eps));
    }
    __syncthreads();
    return rs_shared;
}

template <bool LO>
__device__ __forceinline__ void write_norm(float x, float rs, float g, __half* xn, __half* xn_lo, long long at) {
    const float y = __fmul_rn(__fmul_rn(x, rs), g);
    const __half hi = __float2half_rn(y);
    xn[at] = hi;
    if (LO) xn_lo[at] = __float2half_rn(__fsub_rn(y, __half2float(hi)));
}

}  // namespace moe

// old, kernel 1: combine and residual write. Grid: (T). Block: (256).
__global__ void __launch_bounds__(moe::kThreads)
moe_combine_residual(const float* __restrict__ w, const float* __restrict__ Y, const float* __restrict__ S,
                     const float* __restrict__ beta, const float* Rin, float* Rout, int T, int H, int K, long long ld) {
    using namespace moe;
    const int t = blockIdx.x;
    const float* wk = w + (size_t)t * K;
    const float* Yt = Y + (size_t)t * K * ld;
    for (int i = threadIdx.x; i < H; i += kThreads) {
        const float c = combine_at(Yt, wk, K, ld, S[(size_t)t * ld + i], i);
        for (int r = 0; r < kResidual; ++r) {
            const size_t at = ((size_t)r * T + t) * ld + i;
            Rout[at] = __fmaf_rn(beta[r * T + t], c, Rin[at]);
        }
    }
}

// old, kernel 2: RMS norm of x = sum_r alpha_r R_r, reading R twice. Grid: (T). Block: (256).
template <bool LO>
__global__ void __launch_bounds__(moe::kThreads)
rms_norm_residual4(const float* __restrict__ R, const float* __restrict__ alpha, const float* __restrict__ g,
                   float eps, int T, int H, long long ld, float* __restrict__ rs_out,
                   __half* __restrict__ xn, __half* __restrict__ xn_lo) {
    using namespace moe;
    const int t = blockIdx.x;
    auto mix = [&](int i) {
        float x = __fmul_rn(alpha[t], R[(size_t)t * ld + i]);
        for (int r = 1; r < kResidual; ++r) x = __fmaf_rn(alpha[r * T + t], R[((size_t)r * T + t) * ld + i], x);
        return x;
    };
    float acc = 0.0f;
    for (int i = threadIdx.x; i < H; i += kThreads) {
        const float x = mix(i);
        acc = __fmaf_rn(x, x, acc);
    }
    const float rs = block_rs(acc, H, eps);
    if (threadIdx.x == 0) rs_out[t] = rs;
    for (int i = threadIdx.x; i < H; i += kThreads) write_norm<LO>(mix(i), rs, g[i], xn, xn_lo, (long long)t * ld + i);
}

// new: everything in one pass per token; R and x stay in registers. H = 256 * EPT, K = TOPK.
// Grid: (T). Block: (256).
template <int EPT, int TOPK, bool LO>
__global__ void __launch_bounds__(moe::kThreads)
moe_combine_norm_fused(const float* __restrict__ w, const float* __restrict__ Y, const float* __restrict__ S,
                       const float* __restrict__ beta, const float* __restrict__ alpha, const float* __restrict__ g,
                       float eps, const float* Rin, float* Rout, int T, long long ld,
                       float* __restrict__ rs_out, __half* __restrict__ xn, __half* __restrict__ xn_lo) {
    using namespace moe;
    constexpr int H = kThreads * EPT;
    const int t = blockIdx.x;
    float wk[TOPK], be[kResidual], al[kResidual];
#pragma unroll
    for (int k = 0; k < TOPK; ++k) wk[k] = w[(size_t)t * TOPK + k];
#pragma unroll
    for (int r = 0; r < kResidual; ++r) {
        be[r] = beta[r * T + t];
        al[r] = alpha[r * T + t];
    }
    const float* Yt = Y + (size_t)t * TOPK * ld;
    // Every residual element is loaded before the first store: Rout may alias Rin, so the compiler
    // could not move these loads above the stores by itself, and the loads would be serialized.
    float rin[EPT][kResidual];
#pragma unroll
    for (int m = 0; m < EPT; ++m)
#pragma unroll
        for (int r = 0; r < kResidual; ++r) rin[m][r] = Rin[((size_t)r * T + t) * ld + threadIdx.x + kThreads * m];
    float x[EPT];
    float acc = 0.0f;
#pragma unroll
    for (int m = 0; m < EPT; ++m) {
        const int i = threadIdx.x + kThreads * m;
        const float c = combine_at(Yt, wk, TOPK, ld, S[(size_t)t * ld + i], i);
        float xm = 0.0f;
#pragma unroll
        for (int r = 0; r < kResidual; ++r) {
            const size_t at = ((size_t)r * T + t) * ld + i;
            const float rr = __fmaf_rn(be[r], c, rin[m][r]);
            Rout[at] = rr;
            xm = r == 0 ? __fmul_rn(al[0], rr) : __fmaf_rn(al[r], rr, xm);
        }
        x[m] = xm;
        acc = __fmaf_rn(xm, xm, acc);
    }
    const float rs = block_rs(acc, H, eps);
    if (threadIdx.x == 0) rs_out[t] = rs;
#pragma unroll
    for (int m = 0; m < EPT; ++m) {
        const int i = threadIdx.x + kThreads * m;
        write_norm<LO>(x[m], rs, g[i], xn, xn_lo, (long long)t * ld + i);
    }
}
