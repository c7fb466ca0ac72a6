// mma_common.cuh: the pieces of mmvq_mma.cu's schedule a tensor-core mmvq kernel shares: the activations
// staged in the mma's B order, the m16n8k32 and m16n8k16 s8 mmas, the chunk integer's float without I2F, a
// tile group's barrier and the butterfly's tree over its 4 warps. Their arithmetic contracts are in mmvq_mma.cu's
// header.
// Host-compilable (tests/iq_host), like iq_decode.cuh: the asm is device-only.
#pragma once
#include "common/iq_decode.cuh"

// Where the tensor-core instructions exist: mma.sync of int8 (m16n8k32, m16n8k16) and cp.async need sm_80.
// Every built-in source also compiles for sm_75; there these kernels compile to a trap, and the launch
// never picks them (strata_bench/families/mmvq_mma.py, MMA_MAJOR).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define STRATA_MMA_DEVICE 1
#endif

namespace siq {

// The float (float)(ls * C) from the mma's integer started at the bits of 1.5 * 2^23 (chunk_isum_f's
// trick, iq_decode.cuh): the integer ends at the bits of the float 1.5 * 2^23 + C (|C| <= 32 * 128 * 127
// < 2^22 keeps it in the binade where floats are the integers), and fmaf(that, ls, -1.5 * 2^23 * ls) is
// C * ls exactly (for ls = 1 a single exact FADD). The same float as the I2F of the int, without the
// quarter-rate conversion (four per chunk and lane in mmvq_mma).
constexpr int MMA_MAGIC = 0x4B400000;      // the bits of 12582912.0f
constexpr float MMA_BIAS = 12582912.0f;    // 1.5 * 2^23
__device__ __forceinline__ float isum_float(int d, int ls) {
    return fmaf(__int_as_float(d), (float)ls, -MMA_BIAS * (float)ls);
}
// (float)ls without I2F (a quarter-rate pipe; two per chunk and lane where ls is the block's scale, not
// the constant 1): ls < 2^22 in magnitude lands in the significand of 1.5 * 2^23, where floats are the
// integers, so the difference is ls exactly. For a constant ls it folds to the constant.
__device__ __forceinline__ float small_int_float(int ls) { return __int_as_float(MMA_MAGIC + ls) - MMA_BIAS; }
// isum_float with the scale's float from small_int_float: the same float ((float)ls either way).
__device__ __forceinline__ float isum_float_ls(int d, int ls) {
    const float l = small_int_float(ls);
    return fmaf(__int_as_float(d), l, -MMA_BIAS * l);
}

// The 8 columns' q8_1 blocks staged in the mma's B order: for chunk c, word (4h + t) of column g at
// q[64c + 32h + 8t + g] (a warp's b_h load is 32 consecutive words), and float(d16) of column col at
// d[8c + col]. The same bits as StagedActs (mmvq.cu): code words copied, d by the same __half2float.
// Bytes: 36 per block, as mmvq_new's staging (64 + 8 words per chunk).
struct MmaActs {
    const uint32_t* q;
    const float* d;
};

__device__ __forceinline__ MmaActs stage_acts_mma(const block_q8_1* __restrict__ X, int nchunks, uint32_t* smem) {
    float* d = reinterpret_cast<float*>(smem + 64 * nchunks);
    // A thread copies whole blocks (9 independent loads in flight, a few iterations per thread, where a
    // word per iteration would wait out a global-memory latency 36 times at K = 8192). Block i = 8c + g:
    // column g, chunk c; its word 4h + t lands at 64c + 32h + 8t + g (stores 4-way bank conflicted: once
    // per block of the grid, beside the tiles' conflict-free loads).
#pragma unroll 2
    for (int i = threadIdx.x; i < 8 * nchunks; i += blockDim.x) {
        const int c = i / 8, g = i % 8;
        const block_q8_1* xb = X + (long long)g * nchunks + c;
        const uint32_t* qs = reinterpret_cast<const uint32_t*>(xb->qs);
        uint32_t w[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) w[k] = qs[k];
        const float dv = __half2float(xb->d);
#pragma unroll
        for (int k = 0; k < 8; ++k) smem[64 * c + 32 * (k / 4) + 8 * (k % 4) + g] = w[k];
        d[i] = dv;
    }
    return MmaActs{smem, d};
}

// One m16n8k32 s8 mma, D = A B + C, C = `init` in every element.
__device__ __forceinline__ void mma_s8(const int (&a)[4], const int (&b)[2], int init, int (&d)[4]) {
#ifdef STRATA_MMA_DEVICE
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(init));
#elif defined(__CUDA_ARCH__)
    __trap();
#endif
}

// One m16n8k16 s8 mma, D = A B + C, C = `init` in every element (A: rows g, g + 8 at k 4t..4t+3; B: k 4t..4t+3
// of column g): the split formats' two mmas a chunk (mma_frag_split.cuh).
__device__ __forceinline__ void mma_s8_k16(const int (&a)[2], int b, int init, int (&d)[4]) {
#ifdef STRATA_MMA_DEVICE
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b), "r"(init));
#elif defined(__CUDA_ARCH__)
    __trap();
#endif
}

// A barrier of one tile group's 4 warps (named barrier 1 + tg, 128 threads): the groups of a block run
// different numbers of tiles, so a block-wide __syncthreads could pair one group's barrier with another's.
__device__ __forceinline__ void group_sync(int tg) {
#ifdef __CUDA_ARCH__
    asm volatile("bar.sync %0, 128;" ::"r"(1 + tg) : "memory");
#endif
}

// The butterfly's tree over the tile's 4 warps (the contract above). part: 3 buffers of 32 floats x 32
// lanes (float k of lane l at 32k + l: a warp's store or load of one k is conflict-free);
// warps 2, 3 write part[0], part[1]; warp 1 writes part[2] (three buffers: a warp that runs ahead into
// the next tile writes only a buffer whose readers have passed a later barrier). Warp 0 returns y.
__device__ __forceinline__ void tile_tree(float (&acc)[8][4], float* part, float (&y)[4]) {
    const int lane = threadIdx.x % 32, q = (threadIdx.x / 32) % 4, tg = threadIdx.x / 128;
    float* mine = part + lane;
    if (q >= 2) {
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) mine[(q - 2) * 1024 + 32 * (4 * i + e)] = acc[i][e];
    }
    group_sync(tg);
    if (q < 2) {  // s1[8q + i] = a[8q + i] + a[8q + i + 16]
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][e] = acc[i][e] + mine[q * 1024 + 32 * (4 * i + e)];
    }
    group_sync(tg);
    if (q == 1) {
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) mine[2048 + 32 * (4 * i + e)] = acc[i][e];
    }
    group_sync(tg);
    if (q == 0) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float s2[8], s3[4];
#pragma unroll
            for (int i = 0; i < 8; ++i) s2[i] = acc[i][e] + mine[2048 + 32 * (4 * i + e)];  // s1[i] + s1[i + 8]
#pragma unroll
            for (int i = 0; i < 4; ++i) s3[i] = s2[i] + s2[i + 4];
            y[e] = (s3[0] + s3[2]) + (s3[1] + s3[3]);  // s4[0] + s4[1]
        }
    }
}

}  // namespace siq
