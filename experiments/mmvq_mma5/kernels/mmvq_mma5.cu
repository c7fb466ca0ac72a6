// mmvq_mma5.cu: the built-in mmvq_mma kernel (kernels_src/mmvq/mmvq_mma.cu, included as it is) with this
// experiment's fragment decoders (mma_frag5.cuh): mmvq_mma<fmt_iq3_xxs | fmt_iq3_s, TG, MINB, 1> as the kernel
// is, and for the split tags (fmt_<iq1_m | iq2_xs | iq2_s>_k16[pair]) its mma_chunk specialized to two m16n8k16
// mmas, one per 16-value scale. The arithmetic contract is mmvq_mma.cu's with mma_frag5.cuh's split part;
// parity checks every variant bitwise against old.
#include "mma_frag5.cuh"
#include "mmvq/mmvq_mma.cu"

// In the global namespace, with mmvq_mma.cu's mma_chunk (its `using namespace siq` is in effect).

// mma_chunk for a split tag: the lane's 4 outputs (rows g, g, g + 8, g + 8; columns 2t, 2t + 1, 2t, 2t + 1)
// get acc = fmaf(dw * d_act, float(ls0 * C0 + ls1 * C1), acc), C0 from words t (values 0-15), C1 from words 4 + t
// (values 16-31), the float as MmaFrag<F>::isum_float gives it (mma_frag5.cuh's contract).
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
// NVRTC instantiates the name expressions after the whole source).
#define MMA5_CHUNK(name)                                                                                        \
    template <>                                                                                                 \
    __device__ __forceinline__ void mma_chunk<fmt_##name##_k16>(const uint8_t* group, int i, int c,             \
                                                                const MmaActs& xs, const uint32_t (&kv)[4],      \
                                                                const Tab& tab, float (&acc)[4]) {               \
        mma_chunk_k16<fmt_##name##_k16>(group, i, c, xs, kv, tab, acc);                                         \
    }                                                                                                           \
    template <>                                                                                                 \
    __device__ __forceinline__ void mma_chunk<fmt_##name##_k16pair>(const uint8_t* group, int i, int c,         \
                                                                    const MmaActs& xs, const uint32_t (&kv)[4],  \
                                                                    const Tab& tab, float (&acc)[4]) {           \
        mma_chunk_k16<fmt_##name##_k16pair>(group, i, c, xs, kv, tab, acc);                                     \
    }
MMA5_SPLIT_TAGS(MMA5_CHUNK)
#undef MMA5_CHUNK
