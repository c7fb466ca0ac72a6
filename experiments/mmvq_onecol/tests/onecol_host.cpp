// Host emulation of experiments/mmvq_onecol's kernel (kernels/mmvq_onecol.cu) with its own decoders
// (kernels/onecol_dec.cuh, compiled here by a C++ compiler with tests/iq_host/include's CUDA stand-ins).
// usage: onecol_host DECODER ROWS COLS W.bin X.bin N OUT.bin
//   DECODER: iq2_xxs:arith, iq2_xxs:stab1, iq2_xxs:stab16, iq2_xxs:mul7, iq2_xxs:mul7w, iq1_s:nib, iq1_s:bytes,
//   iq1_s:tern.
//   W.bin: ROWS rows of raw blocks; X.bin: N rows of q8_1 blocks (COLS/32 each).
//   OUT.bin: float y[N][ROWS], each column as the kernel's one-column pass computes it: the rows laid out as on
//   the device (a 16-byte aligned stride, 16 readable bytes after the last row), the tables and activations
//   staged as the kernel stages them, lane l taking chunks l, l + 32, ... through Ptr/load/isum with
//   acc = fmaf(d * d_act', (float)isum, acc), then warp_sum_f32's butterfly.
// ONECOL_DEFECT (environment), to show the comparison has teeth: "parity" drops the 8th sign (bit 30) from the
// staged sign table; "codesum" stages a zero code sum; "scale" stages d_act without its power of two; "order"
// stages the codes in old's order for a decoder that reads them in its own (Iq2xxsMul7). Defects inside the
// decoders' arithmetic come from a build with onecol_dec.cuh's ONECOL_MUL7_* or ONECOL_TERN_* macros overridden.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "host_util.h"  // read_file, butterfly

#include "onecol_dec.cuh"

using namespace siq;
using namespace onecol;

static bool defect(const char* name) {
    const char* d = getenv("ONECOL_DEFECT");
    return d && !strcmp(d, name);
}

// What a decoder stages beside d_act: CODE_SUM_FACTOR times the code sum, or nothing (0).
template <class D>
static int code_sum_factor() {
    if constexpr (D::CODE_SUM) return D::CODE_SUM_FACTOR;
    return 0;
}

// The staged activation block: codes (in the decoder's order), scale times D_ACT_SCALE, the code sum times the
// decoder's factor (stage_onecol_acts).
struct HostAct {
    int q[8];
    float d;
    int code_sum2;
};

template <class D>
static std::vector<HostAct> stage_acts(const block_q8_1* x, int n) {
    std::vector<HostAct> out(n);
    for (int i = 0; i < n; ++i) {
        uint32_t w[8];
        memcpy(w, x[i].qs, 32);
        if (!defect("order")) ActPairs<D>::apply(w);
        memcpy(out[i].q, w, 32);
        out[i].d = __half2float(x[i].d) * (defect("scale") ? 1.0f : D::D_ACT_SCALE);
        int sum = 0;
        for (int k = 0; k < 8; ++k) sum = __dp4a(out[i].q[k], 0x01010101, sum);
        out[i].code_sum2 = defect("codesum") ? 0 : code_sum_factor<D>() * sum;
    }
    return out;
}

template <class D>
static std::vector<uint32_t> stage_tables() {
    std::vector<uint32_t> sh(D::SHARED_WORDS);
    D::stage(sh.data(), 0, 1);
    if (defect("parity"))
        for (int i = D::GRID_WORDS; i < D::SHARED_WORDS; ++i) sh[i] &= ~0x40000000u;  // the sign table (iq2_xxs)
    return sh;
}

// One lane's chain over row `row` (lane's chunks in increasing order), as onecol_step does it.
template <class D>
static float lane_chain(const uint8_t* row, int lane, int nchunks, const std::vector<uint32_t>& sh,
                        const HostAct* acts) {
    const LaneWalk<typename D::F> walk(lane);
    const uint32_t shift = D::shift(row + walk.first, walk.j);
    const LaneConst lc = D::lane_const(sh.data(), lane);
    typename D::Ptr p(row + walk.first, walk.j);
    float acc = 0.0f;
    for (int c = lane; c < nchunks; c += 32) {
        const typename D::Raw raw = p.load(shift);
        p.advance();
        const HostAct& a = acts[c];
        acc = fmaf(D::d(raw) * a.d, (float)D::isum(sh.data(), raw, lc, a.q, a.code_sum2), acc);
    }
    return acc;
}

template <class D>
static void run(const std::vector<uint8_t>& w, int rows, int cols, const std::vector<uint8_t>& x, int n, FILE* out) {
    using F = typename D::F;
    const int nchunks = cols / 32;
    const size_t row_bytes = (size_t)cols / F::QK * F::BYTES, stride = (row_bytes + 15) / 16 * 16;
    // The device layout: 16-byte aligned rows at a 16-byte stride, 16 bytes of slack after the last.
    std::vector<uint8_t> store(stride * rows + 16 + 16, 0);
    uint8_t* base = store.data() + (16 - reinterpret_cast<uintptr_t>(store.data()) % 16) % 16;
    for (int r = 0; r < rows; ++r) memcpy(base + r * stride, w.data() + r * row_bytes, row_bytes);
    const std::vector<uint32_t> sh = stage_tables<D>();
    const block_q8_1* xb = reinterpret_cast<const block_q8_1*>(x.data());
    for (int c = 0; c < n; ++c) {
        const std::vector<HostAct> acts = stage_acts<D>(xb + (size_t)c * nchunks, nchunks);
        for (int r = 0; r < rows; ++r) {
            float lanes[32];
            for (int l = 0; l < 32; ++l) {
                threadIdx.x = (unsigned)l;
                lanes[l] = lane_chain<D>(base + r * stride, l, nchunks, sh, acts.data());
            }
            const float y = butterfly(lanes);
            fwrite(&y, 4, 1, out);
        }
    }
}

int main(int argc, char** argv) {
    if (argc != 8) { fprintf(stderr, "usage: onecol_host DECODER ROWS COLS W.bin X.bin N OUT.bin\n"); return 2; }
    const char* dec = argv[1];
    const int rows = atoi(argv[2]), cols = atoi(argv[3]), n = atoi(argv[6]);
    const std::vector<uint8_t> w = read_file(argv[4]);
    const std::vector<uint8_t> x = read_file(argv[5]);
    FILE* out = fopen(argv[7], "wb");
    if (!out) { perror(argv[7]); return 2; }
#define DECODER(name, ...) if (!strcmp(dec, name)) run<__VA_ARGS__>(w, rows, cols, x, n, out); else
    DECODER("iq2_xxs:arith", Iq2xxsOneCol<false>) DECODER("iq2_xxs:stab1", Iq2xxsOneCol<true>)
    DECODER("iq2_xxs:stab16", Iq2xxsOneCol<true, 16>) DECODER("iq1_s:nib", Iq1sOneCol<false>)
    DECODER("iq1_s:bytes", Iq1sOneCol<true>) DECODER("iq2_xxs:mul7", Iq2xxsMul7) DECODER("iq1_s:tern", Iq1sTern)
    DECODER("iq2_xxs:mul7w", Iq2xxsMul7W)
    { fprintf(stderr, "unknown decoder %s\n", dec); return 2; }
    fclose(out);
    return 0;
}
