// q2warp.cu: Q2_0 weights x q8_1 activations (1 to 4 columns), the exact layout (old) and rows per
// warp (new).
//
// ARITHMETIC CONTRACT
//   Data. A row of K inputs is nb = K/64 Q2_0 blocks (18 bytes: fp16 d, qs[16]); element j of a block
//   has code q = (qs[j % 16] >> 2*(j / 16)) & 3 and value d*(2q - 3). Half-block h of a row (h in
//   0..2nb-1) is elements 32*(h%2)..+31 of block h/2: for half p the codes are the nibble p of every qs
//   byte (bits 4p..4p+1 give elements 0..15, bits 4p+2..4p+3 give elements 16..31). Activations are
//   q8_1 blocks (strata_common.cuh), column c's 2nb blocks contiguous, column c at block c*2nb; q8_1
//   block h of a column covers the same 32 inputs as half-block h. Output y[c*rows + row], float32.
//   Exact part. For every (row, column, half-block): S_h = sum_i (2q_i - 3)*a_i computed as
//   2*sum_i q_i*a_i - 3*sum_i a_i with __dp4a; |S_h| <= 32*3*128, so every int is exact.
//   Rounding, in this order, with explicit _rn intrinsics (no contraction can change it):
//   1. f_h = __fmul_rn(d_w, d_a)                        (fp16 scales widened exactly to fp32)
//   2. a thread's partial: acc = __fmaf_rn(f_h, (float)S_h, acc), from acc = +0, over its half-blocks
//      h = t, t+128, t+256, ... in increasing order (t = 0..127, the exact layout's thread index);
//   3. per row and column: s = acc[t] + acc[32+t] + acc[64+t] + acc[96+t] (left to right, __fadd_rn),
//      for t = 0..31, including the +0 partials of threads that had no half-block;
//   4. warp_sum_f32(s) over t (strata_common.cuh's butterfly: xor 16, 8, 4, 2, 1).
//   Why old and new are bitwise equal. Both kernels perform exactly steps 1-4 on the same operands.
//   old: thread t of a 128-thread block runs step 2 for its row; warp 0 does steps 3-4 from shared
//   memory. new: lane l of a warp runs step 2 for the four "threads" l, 32+l, 64+l, 96+l of each of its
//   four rows (as four separate accumulators, each in the same half-block order), then steps 3-4 in
//   registers. Only the way bytes reach registers differs (new stages 16-byte granules through shared
//   memory); the integer S_h and the float operations, operands and order are the same.
//
// MEMORY CONTRACT (new only): weight and activation bytes are read as the aligned 16-byte granules
//   that contain them, so a granule may extend up to 15 bytes before the first or after the last byte
//   of a buffer: the caller's allocation must cover those granules (the harness rounds both buffers'
//   allocations up to whole granules; relying on cudaMalloc's rounding instead is what
//   compute-sanitizer's memcheck reports as a read past the allocation). The extra bytes are never
//   used. The activation pointer must be 4-byte aligned (q8_1 codes are read as 32-bit words), the
//   weight pointer 2-byte aligned.
#include "common/strata_common.cuh"
#include "formats/q2_0.cuh"

namespace q2w {

constexpr int kBlockBytes = layout::q2_0::BYTES;  // one Q2_0 block
constexpr int kQ81Bytes = layout::q8_1::BYTES;   // one q8_1 block
constexpr int kOldThreads = STRATA_Q2WARP_OLD_THREADS;  // the exact layout: four warps per row
constexpr int kGroupHalves = 32;    // a warp's 32 lanes cover 32 consecutive half-blocks = 16 blocks
constexpr int kGroupBytes = 16 * kBlockBytes;  // 288
constexpr int kSlotGranules = STRATA_Q2WARP_SLOT_GRANULES;  // 16-byte granules staged per row and group: ceil((15 + 288) / 16) = 19, padded

// sum_i a_i of one q8_1 block, exact.
__device__ __forceinline__ int act_sum(const int (&a)[8]) {
    int s = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) s = __dp4a(0x01010101, a[k], s);
    return s;
}

// The 32 codes of half `half` of a block whose 16 code bytes are `qs` (little-endian words), one byte
// each, in activation order: word k < 4 holds elements 4k..4k+3, word 4+k elements 16+4k..16+4k+3.
__device__ __forceinline__ void half_codes(const uint32_t (&qs)[4], int half, int (&codes)[8]) {
    const int shift = 4 * half;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        codes[k] = (int)((qs[k] >> shift) & 0x03030303u);
        codes[4 + k] = (int)((qs[k] >> (shift + 2)) & 0x03030303u);
    }
}

// S_h = sum_i (2 q_i - 3) a_i = 2 sum_i q_i a_i - 3 sum_i a_i, given asum = sum_i a_i. Exact.
__device__ __forceinline__ int half_dot(const int (&codes)[8], const int (&a)[8], int asum) {
    int sqa = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) sqa = __dp4a(codes[k], a[k], sqa);
    return 2 * sqa - 3 * asum;
}

// Contract steps 1-2 for one half-block.
__device__ __forceinline__ float accumulate(float acc, float dw, float da, int s_h) {
    return __fmaf_rn(__fmul_rn(dw, da), __int2float_rn(s_h), acc);
}

// Load a q8_1 block's scale and codes (the block must be 4-byte aligned).
__device__ __forceinline__ float load_act(const uint8_t* blk, int (&a)[8]) {
    const int* words = reinterpret_cast<const int*>(blk + 4);
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] = words[k];
    return __half2float(*reinterpret_cast<const __half*>(blk));
}

}  // namespace q2w

// ------------------------------------------------------------------------------------------------
// old: the exact layout. One 128-thread block per row; thread t takes half-blocks t, t+128, ...
// Grid: (rows). Block: (128).
template <int NCOLS>
__global__ void __launch_bounds__(q2w::kOldThreads)
q2warp_old(const uint8_t* __restrict__ w, const uint8_t* __restrict__ act, float* __restrict__ y,
           int rows, int nb) {
    using namespace q2w;
    const int row = blockIdx.x;
    const int t = threadIdx.x;
    const int nh = 2 * nb;
    const uint8_t* wrow = w + (size_t)row * nb * kBlockBytes;

    float acc[NCOLS];
#pragma unroll
    for (int c = 0; c < NCOLS; ++c) acc[c] = 0.0f;

    for (int h = t; h < nh; h += kOldThreads) {
        const uint16_t* b16 = reinterpret_cast<const uint16_t*>(wrow + (size_t)(h >> 1) * kBlockBytes);
        const float dw = __half2float(__ushort_as_half(b16[0]));
        uint32_t qs[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) qs[k] = (uint32_t)b16[1 + 2 * k] | ((uint32_t)b16[2 + 2 * k] << 16);
        int codes[8];
        half_codes(qs, h & 1, codes);
#pragma unroll
        for (int c = 0; c < NCOLS; ++c) {
            int a[8];
            const float da = load_act(act + ((size_t)c * nh + h) * kQ81Bytes, a);
            acc[c] = accumulate(acc[c], dw, da, half_dot(codes, a, act_sum(a)));
        }
    }

    __shared__ float part[NCOLS][kOldThreads];
#pragma unroll
    for (int c = 0; c < NCOLS; ++c) part[c][t] = acc[c];
    __syncthreads();
    if (t < 32) {
#pragma unroll
        for (int c = 0; c < NCOLS; ++c) {
            float s = part[c][t];
            s = __fadd_rn(s, part[c][32 + t]);
            s = __fadd_rn(s, part[c][64 + t]);
            s = __fadd_rn(s, part[c][96 + t]);
            s = warp_sum_f32(s);
            if (t == 0) y[(size_t)c * rows + row] = s;
        }
    }
}

// ------------------------------------------------------------------------------------------------
// new: rows per warp. A warp owns four rows; lane l plays the exact layout's threads l, 32+l, 64+l,
// 96+l ("chunk" w = 0..3 of the lane) for each of them. Half-blocks are visited in groups of 32
// (group g = half-blocks 32g..32g+31); chunk w owns the groups g = w, w+4, w+8, ..., so each lane's
// accumulator for chunk w sees its half-blocks in the exact layout's order. The groups are walked
// chunk by chunk (w = 0, 1, 2, 3), and the next group's weight bytes are loaded into registers
// (16-byte granules) while the current group is computed from shared memory.
// The whole activation vector is staged once per block in dynamic shared memory.
// Grid: (ceil(rows / (4*NWARPS))). Block: (32*NWARPS). Dynamic shared memory: the activation granules.
namespace q2w {

struct RowSet {
    const uint8_t* w;
    int rows, nb, row0;

    // Byte address of group g of row r of this set, and its offset inside its first granule.
    __device__ __forceinline__ size_t group_start(int r, int g) const {
        return reinterpret_cast<size_t>(w) + ((size_t)(row0 + r) * nb) * kBlockBytes + (size_t)g * kGroupBytes;
    }
};

// Load group g of the four rows as 16-byte granules: slot idx = r*kSlotGranules + k, slots lane+32j.
__device__ __forceinline__ void stage_load(const RowSet& rs, int g, int lane, uint4 (&v)[3]) {
    const int len = min(16, rs.nb - 16 * g) * kBlockBytes;
#pragma unroll
    for (int j = 0; j < 3; ++j) {
        const int idx = lane + 32 * j;
        const int r = idx / kSlotGranules, k = idx - r * kSlotGranules;
        v[j] = make_uint4(0u, 0u, 0u, 0u);
        if (r < STRATA_Q2WARP_ROWS_PER_WARP && rs.row0 + r < rs.rows) {
            const size_t start = rs.group_start(r, g);
            const int head = (int)(start & 15);
            if (k < (head + len + 15) >> 4) v[j] = __ldg(reinterpret_cast<const uint4*>(start - head) + k);
        }
    }
}

__device__ __forceinline__ void stage_store(uint4* slots, int lane, const uint4 (&v)[3]) {
#pragma unroll
    for (int j = 0; j < 3; ++j) {
        const int idx = lane + 32 * j;
        if (idx < STRATA_Q2WARP_ROWS_PER_WARP * kSlotGranules) slots[idx] = v[j];
    }
}

// The 18 bytes of block k of staged row r: read the five aligned words that cover them and shift.
__device__ __forceinline__ float staged_block(const uint32_t* words, int r, int head, int k, uint32_t (&qs)[4]) {
    const int o = r * kSlotGranules * 16 + head + k * kBlockBytes;  // even: blocks are 2-byte aligned
    const uint32_t* p = words + (o >> 2);
    const int sh = (o & 3) * 8;  // 0 or 16
    uint32_t wd[5];
#pragma unroll
    for (int i = 0; i < 5; ++i) wd[i] = p[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) qs[i] = __funnelshift_rc(wd[i], wd[i + 1], 16 + sh);  // sh=16: wd[i+1]
    return __half2float(__ushort_as_half((unsigned short)(__funnelshift_rc(wd[0], wd[1], sh) & 0xffffu)));
}

// Occupancy asked of ptxas (resident warps per SM): the accumulators grow with the column count, and
// these are the largest that compile without spills (sm_100 and newer need a few more registers).
__host__ __device__ constexpr int min_warps_per_sm(int ncols) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
    return ncols == 1 ? 24 : (ncols == 2 ? 20 : 12);
#else
    return ncols == 1 ? 32 : (ncols == 2 ? 20 : 16);
#endif
}

}  // namespace q2w

template <int NCOLS, int NWARPS>
__global__ void __launch_bounds__(32 * NWARPS, q2w::min_warps_per_sm(NCOLS) / NWARPS)
q2warp_new(const uint8_t* __restrict__ w, const uint8_t* __restrict__ act, float* __restrict__ y,
           int rows, int nb) {
    using namespace q2w;
    extern __shared__ uint4 act_granules[];
    __shared__ uint4 wslots[NWARPS][STRATA_Q2WARP_ROWS_PER_WARP * kSlotGranules];
    const int nh = 2 * nb;

    // Stage every activation byte of every column (one block-wide sync, then warps run freely).
    const size_t abase = reinterpret_cast<size_t>(act);
    const int ahead = (int)(abase & 15);
    const int an16 = (ahead + NCOLS * nh * kQ81Bytes + 15) >> 4;
    const uint4* asrc = reinterpret_cast<const uint4*>(abase - ahead);
    for (int i = threadIdx.x; i < an16; i += 32 * NWARPS) act_granules[i] = __ldg(asrc + i);
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const RowSet rs{w, rows, nb, (int)(blockIdx.x * NWARPS + warp) * STRATA_Q2WARP_ROWS_PER_WARP};
    if (rs.row0 >= rows) return;
    const uint8_t* abytes = reinterpret_cast<const uint8_t*>(act_granules) + ahead;
    const uint32_t* wwords = reinterpret_cast<const uint32_t*>(wslots[warp]);
    const int ngroups = (nh + kGroupHalves - 1) / kGroupHalves;
    const int nchunks = min(4, ngroups);  // chunks w >= ngroups have no half-block at all

    float p[STRATA_Q2WARP_ROWS_PER_WARP][NCOLS], s[STRATA_Q2WARP_ROWS_PER_WARP][NCOLS];
#pragma unroll
    for (int r = 0; r < STRATA_Q2WARP_ROWS_PER_WARP; ++r)
#pragma unroll
        for (int c = 0; c < NCOLS; ++c) p[r][c] = 0.0f;

    uint4 v[3];
    stage_load(rs, 0, lane, v);
    for (int g = 0; g >= 0;) {
        __syncwarp();  // every lane finished reading the previous group
        stage_store(wslots[warp], lane, v);
        __syncwarp();
        const int chunk = g & 3;
        const bool chunk_ends = g + 4 >= ngroups;
        const int next = !chunk_ends ? g + 4 : (chunk + 1 < nchunks ? chunk + 1 : -1);
        if (next >= 0) stage_load(rs, next, lane, v);

        const int h = g * kGroupHalves + lane;
        if (h < nh) {
            // This half-block's activations for every column, then one row at a time: its codes are
            // extracted once and dotted with each column (the integers are the exact layout's).
            int a[NCOLS][8], asum[NCOLS];
            float da[NCOLS];
#pragma unroll
            for (int c = 0; c < NCOLS; ++c) {
                da[c] = load_act(abytes + ((size_t)c * nh + h) * kQ81Bytes, a[c]);
                asum[c] = act_sum(a[c]);
            }
#pragma unroll
            for (int r = 0; r < STRATA_Q2WARP_ROWS_PER_WARP; ++r) {
                uint32_t qs[4];
                int codes[8];
                const float dw = staged_block(wwords, r, (int)(rs.group_start(r, g) & 15), lane >> 1, qs);
                half_codes(qs, lane & 1, codes);
#pragma unroll
                for (int c = 0; c < NCOLS; ++c) p[r][c] = accumulate(p[r][c], dw, da[c], half_dot(codes, a[c], asum[c]));
            }
        }
        if (chunk_ends) {  // contract step 3, incrementally: s = p(chunk 0) + p(chunk 1) + ...
#pragma unroll
            for (int r = 0; r < STRATA_Q2WARP_ROWS_PER_WARP; ++r)
#pragma unroll
                for (int c = 0; c < NCOLS; ++c) {
                    s[r][c] = chunk == 0 ? p[r][c] : __fadd_rn(s[r][c], p[r][c]);
                    p[r][c] = 0.0f;
                }
        }
        g = next;
    }
    // Chunks that had no group still add their +0 partial, as the exact layout's idle threads do.
    for (int chunk = nchunks; chunk < 4; ++chunk)
#pragma unroll
        for (int r = 0; r < STRATA_Q2WARP_ROWS_PER_WARP; ++r)
#pragma unroll
            for (int c = 0; c < NCOLS; ++c) s[r][c] = __fadd_rn(s[r][c], 0.0f);

#pragma unroll
    for (int r = 0; r < STRATA_Q2WARP_ROWS_PER_WARP; ++r)
#pragma unroll
        for (int c = 0; c < NCOLS; ++c) {
            const float tot = warp_sum_f32(s[r][c]);  // every lane holds the same total
            if (lane == ((r * NCOLS + c) & 31) && rs.row0 + r < rows) y[(size_t)c * rows + rs.row0 + r] = tot;
        }
}
