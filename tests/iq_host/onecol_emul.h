// Host emulation of kernels_src/mmvq/mmvq_onecol.cu (the one-column pass mmvq's `new` runs for tall iq2_xxs, iq1_s and
// iq1_m shapes) with the product's decoders (mmvq/onecol_dec.cuh, onecol_dec_iq1m.cuh, compiled here for the CPU): the rows laid out as on the
// device (a 16-byte aligned stride, 16 readable bytes after the last row), the tables and activations staged as the
// kernel stages them (stage_onecol_acts: ActPairs' code order, the scale times D_ACT_SCALE, the code sum), and the
// kernel's schedule: row groups of 8 warps x R rows, row0 + r clamped to the last row for reading and stored only
// below `rows`, lane l taking chunks l, l + 32, ... through Ptr/load/isum, then warp_sum_f32's butterfly.
// A defect planted in one tail path of that schedule (tests/families/test_mmvq_onecol.py: the default cases that
// reach the path must come out with other bits), named by MMA_EMUL_DEFECT as harness.run_dot passes it:
//   tail_group: whole row groups only (rows / (8 R) groups: a last, partial group is not computed);
//   lane_steps: whole 32-chunk lane steps only (a lane's last step, where not every lane has a chunk, is dropped).
// Outputs a defect leaves unwritten hold a NaN that no computed output has.
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "host_util.h"  // butterfly

#include "mmvq/onecol_dec.cuh"
#include "mmvq/onecol_dec_iq1m.cuh"

namespace onecol_emul {
using namespace siq;

enum class Defect { none, tail_group, lane_steps };

inline Defect planted_defect() {
    const char* name = getenv("MMA_EMUL_DEFECT");
    if (name == nullptr || !*name) return Defect::none;
    if (!strcmp(name, "tail_group")) return Defect::tail_group;
    if (!strcmp(name, "lane_steps")) return Defect::lane_steps;
    fprintf(stderr, "unknown MMA_EMUL_DEFECT %s\n", name);
    exit(2);
}

constexpr int WARPS = 8;                   // STRATA_MMVQ_NEW_WARPS: the kernel's block
constexpr uint32_t UNWRITTEN = 0x7FC0DEADu;  // a NaN no chunk chain gives (they give finite values)

struct Act {
    int q[8];
    float d;
    int code_sum;
};

// stage_onecol_acts of one column's n blocks.
template <class D>
std::vector<Act> stage_acts(const block_q8_1* x, int n) {
    std::vector<Act> out(n);
    for (int i = 0; i < n; ++i) {
        uint32_t w[8];
        memcpy(w, x[i].qs, 32);
        onecol::ActPairs<D>::apply(w);
        memcpy(out[i].q, w, 32);
        out[i].d = __half2float(x[i].d) * D::D_ACT_SCALE;
        int sum = 0;
        for (int k = 0; k < 8; ++k) sum = __dp4a(out[i].q[k], 0x01010101, sum);  // any order: the same sum
        out[i].code_sum = 0;
        if constexpr (D::CODE_SUM) out[i].code_sum = D::CODE_SUM_FACTOR * sum;
    }
    return out;
}

// One lane's chain over the row at `row` (onecol_step's order), the loop bound as the defect makes it.
template <class D>
float lane_chain(const uint8_t* row, int lane, int nchunks, const uint32_t* sh, const Act* acts, Defect defect) {
    const LaneWalk<typename D::F> walk(lane);
    threadIdx.x = (unsigned)lane;
    const uint32_t shift = D::shift(row + walk.first, walk.j);
    const onecol::LaneConst lc = D::lane_const(sh, lane);
    typename D::Ptr p(row + walk.first, walk.j);
    float acc = 0.0f;
    for (int c = lane; defect == Defect::lane_steps ? c - lane + 32 <= nchunks : c < nchunks; c += 32) {
        const typename D::Raw raw = p.load(shift);
        p.advance();
        acc = fmaf(D::d(raw) * acts[c].d, (float)D::isum(sh, raw, lc, acts[c].q, acts[c].code_sum), acc);
    }
    return acc;
}

// y[n][rows] as mmvq_onecol<D, R, ...> computes each column's pass.
template <class D>
void run(const std::vector<uint8_t>& w, int rows, int cols, const std::vector<uint8_t>& x, int n, int R, FILE* out) {
    using F = typename D::F;
    const Defect defect = planted_defect();
    const int nchunks = cols / 32;
    const size_t row_bytes = (size_t)cols / F::QK * F::BYTES, stride = (row_bytes + 15) / 16 * 16;
    std::vector<uint8_t> store(stride * rows + 16 + 16, 0);
    uint8_t* base = store.data() + (16 - reinterpret_cast<uintptr_t>(store.data()) % 16) % 16;
    for (int r = 0; r < rows; ++r) memcpy(base + r * stride, w.data() + r * row_bytes, row_bytes);
    std::vector<uint32_t> sh(D::SHARED_WORDS);
    D::stage(sh.data(), 0, 1);
    const int per_group = WARPS * R;
    const int groups = defect == Defect::tail_group ? rows / per_group : (rows + per_group - 1) / per_group;
    const block_q8_1* xb = reinterpret_cast<const block_q8_1*>(x.data());
    std::vector<float> y(rows);
    for (int c = 0; c < n; ++c) {
        const std::vector<Act> acts = stage_acts<D>(xb + (size_t)c * nchunks, nchunks);
        for (int r = 0; r < rows; ++r) memcpy(&y[r], &UNWRITTEN, 4);
        for (int grp = 0; grp < groups; ++grp)
            for (int warp = 0; warp < WARPS; ++warp) {
                const int row0 = (grp * WARPS + warp) * R;
                for (int r = 0; r < R; ++r) {
                    const uint8_t* row = base + (size_t)std::min(row0 + r, rows - 1) * stride;
                    float lanes[32];
                    for (int l = 0; l < 32; ++l)
                        lanes[l] = lane_chain<D>(row, l, nchunks, sh.data(), acts.data(), defect);
                    const float v = butterfly(lanes);
                    if (row0 + r < rows) y[row0 + r] = v;
                }
            }
        fwrite(y.data(), 4, rows, out);
    }
}

// The product's decoder of a format (ONECOL_CONFIGS in strata_bench/families/mmvq_onecol.py names the same types).
inline bool dot_onecol(const char* fmt, const std::vector<uint8_t>& w, int rows, int cols,
                       const std::vector<uint8_t>& x, int n, int R, FILE* out) {
    if (!strcmp(fmt, "iq2_xxs")) run<onecol::Iq2xxsMul7>(w, rows, cols, x, n, R, out);
    else if (!strcmp(fmt, "iq1_s")) run<onecol::Iq1sTern>(w, rows, cols, x, n, R, out);
    else if (!strcmp(fmt, "iq1_m")) run<onecol::Iq1mSel<false>>(w, rows, cols, x, n, R, out);
    else return false;
    return true;
}

}  // namespace onecol_emul
