// mma_stages.cuh: mmvq_mma's cp.async weight stages (WeightPipe<F, S> for S >= 2), an experiment
// (experiments/mmvq_mma): S buffers per warp filled by cp.async, S - 1 groups in flight, measured slower than
// the register-staged S = 1 that `new` runs (docs/PERF_NOTES.md, v7, "mmvq_mma's weight pipe"), so
// kernels_src/mmvq/mmvq_mma.cu declares the template and defines S = 1 only. Include it after mmvq_mma.cu
// (it uses MmaGroup, WeightSrc, GroupCursor); the pipe changes when bytes arrive, never which bytes or the
// math (mmvq_mma.cu's ARITHMETIC CONTRACT).
#pragma once

// 16 bytes global -> shared without passing through registers (sm_80+; .cg: L2 only, as the weights are
// read once). Asynchronous: a commit_group / wait_group pair orders it.
__device__ __forceinline__ void cp_async16(uint4* dst, const uint8_t* src) {
#ifdef STRATA_MMA_DEVICE
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifdef STRATA_MMA_DEVICE
    asm volatile("cp.async.commit_group;" ::: "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#endif
}
template <int N>  // wait until at most N of this thread's committed groups are still in flight
__device__ __forceinline__ void cp_async_wait() {
#ifdef STRATA_MMA_DEVICE
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#elif defined(__CUDA_ARCH__)
    __trap();
#endif
}

// load_group's words (the same words, the same clamped rows; words past the row's end are not copied, so
// the buffer keeps stale bytes there, which no chunk below nchunks reads) straight into the warp's buffer.
template <class F>
__device__ __forceinline__ void issue_group(const WeightSrc& src, int row0, int c0, uint4* buf) {
    using G = MmaGroup<F>;
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < G::PER_LANE; ++j) {
        const int k = lane + 32 * j, r = k / G::U4, off = G::granule(c0, k % G::U4);
        if (k < 16 * G::U4 && off < src.row_bytes)
            cp_async16(buf + G::slot(k), src.W + (long long)min(row0 + r, src.rows - 1) * src.row_stride + off);
    }
}

// How a warp's groups reach its shared buffers: S stage buffers of one group each (16 rows x 8 blocks).
// S >= 2: cp.async, S - 1 groups in flight while one is computed, no registers held for them.
// acquire() returns the buffer of the cursor's current group, ready to read, and issues the group S - 1
// ahead into the buffer computed last (the __syncwarp first: every lane's reads of it are done).
template <class F, int S>
struct WeightPipe {
    static_assert(S >= 2 && S <= 8, "stages");
    static constexpr int WORDS = MmaGroup<F>::WORDS;  // uint4 per stage
    uint4* base;
    int k = 0;  // the stage of the next group to compute
    __device__ __forceinline__ void issue(const WeightSrc& src, GroupCursor& cur, int stage) {
        if (cur.valid()) issue_group<F>(src, 16 * cur.tile, cur.c0, base + stage * WORDS);
        cp_async_commit();  // also when empty: wait_group counts groups
        cur.advance();
    }
    __device__ __forceinline__ void early(const WeightSrc& src, GroupCursor& cur) {
#pragma unroll
        for (int s = 0; s < S - 1; ++s) issue(src, cur, s);
    }
    __device__ __forceinline__ void late(const WeightSrc&, GroupCursor&) {}
    __device__ __forceinline__ const uint8_t* acquire(const WeightSrc& src, GroupCursor& cur) {
        __syncwarp();  // the previous group's reads are done
        issue(src, cur, k == 0 ? S - 1 : k - 1);
        cp_async_wait<S - 1>();  // this lane's copies of the current group have landed
        __syncwarp();            // and every lane's
        const uint8_t* group = reinterpret_cast<const uint8_t*>(base + k * WORDS);
        k = k == S - 1 ? 0 : k + 1;
        return group;
    }
};
