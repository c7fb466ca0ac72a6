// Host driver for the i-quant decoders (kernels_src/common/iq_decode.cuh, dequant/dequant.cuh), compiled with a
// C++ compiler by tests/test_families_dequant.py.
// usage: iq_host FORMAT BLOCKS.bin Q.bin OUT.bin
//   FORMAT: a format, or FORMAT:DECODER for one of mmvq_new's decoders (DECODERS below; w written signed).
//   BLOCKS.bin: n raw blocks of FORMAT; Q.bin: one int8 q8_1 code block (32 bytes) per chunk.
//   OUT.bin per chunk: int32 w[8], int32 ls0, int32 ls1, float dw, float dequant[32], int32 isum,
//   float isum_f (chunk_isum_f: the same value, without the int -> float conversion).
// usage: iq_host dot FORMAT ROWS COLS W.bin X.bin N OUT.bin
//   W.bin: ROWS rows of raw blocks; X.bin: N rows of q8_1 blocks (COLS/32 each).
//   OUT.bin: float y[N][ROWS], each computed as one warp of mmvq.cu computes it: lane l takes chunks
//   l, l+32, ... with acc = fmaf(dw * d_act, (float)isum, acc), then warp_sum_f32's butterfly.
// usage: iq_host dot_mma FORMAT ROWS COLS W.bin X.bin N OUT.bin
//   The same y, computed the way mmvq_mma.cu schedules it (mma_emul.h): tiles of 16 rows x 8 columns,
//   the chunk integers from an emulated m16n8k32 mma fed by the kernel's fragment mapping, the 32
//   virtual lanes split over 4 warps and combined by the butterfly's tree across warps.
// usage: iq_host dot_onecol FORMAT ROWS COLS W.bin X.bin N OUT.bin R
//   The same y, computed the way mmvq_onecol.cu schedules its one-column pass with R rows a warp (onecol_emul.h:
//   the product's decoder of FORMAT, iq2_xxs or iq1_s, its staged tables and activations, the row groups).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "host_util.h"  // read_file, butterfly

#include "common/decoders.cuh"
#include "dequant/dequant.cuh"
#include "mma_emul.h"
#include "onecol_emul.h"

using namespace siq;

// The decoders mmvq_new may use in place of a format's own (strata_bench/families/mmvq_decoders.py),
// named FORMAT:DECODER; each dequantizes (the values it is checked against) as its format does.
using iq3_xxs_masked = sign_masked<fmt_iq3_xxs>;
using iq3_xxs_masked_split = sign_masked<fmt_iq3_xxs, true>;
using iq3_s_masked = sign_masked<fmt_iq3_s>;
using iq3_s_masked_split = sign_masked<fmt_iq3_s, true>;
// The decoders of table copies (TableRep), per format and count: rep_FMT_N and rep_split_FMT_N.
#define REP_ALIASES(fmt, N) \
    using rep_##fmt##_##N = sign_masked_rep<fmt_##fmt, false, N>; \
    using rep_split_##fmt##_##N = sign_masked_rep<fmt_##fmt, true, N>;
REP_ALIASES(iq3_xxs, 8) REP_ALIASES(iq3_xxs, 16) REP_ALIASES(iq3_xxs, 32) REP_ALIASES(iq3_s, 8) REP_ALIASES(iq3_s, 16)
#define REP_DECODERS(X, fmt, N) \
    X(#fmt ":masked-rep" #N, rep_##fmt##_##N, fmt_##fmt) X(#fmt ":masked-split-rep" #N, rep_split_##fmt##_##N, fmt_##fmt)
#define DECODERS(X) \
    X("iq3_xxs:masked", iq3_xxs_masked, fmt_iq3_xxs) X("iq3_xxs:masked-split", iq3_xxs_masked_split, fmt_iq3_xxs) \
    X("iq3_s:masked", iq3_s_masked, fmt_iq3_s) X("iq3_s:masked-split", iq3_s_masked_split, fmt_iq3_s) \
    X("iq2_xxs:lean", fmt_iq2_xxs_lean, fmt_iq2_xxs) X("iq2_xs:lean", fmt_iq2_xs_lean, fmt_iq2_xs) \
    REP_DECODERS(X, iq3_xxs, 8) REP_DECODERS(X, iq3_xxs, 16) REP_DECODERS(X, iq3_xxs, 32) \
    REP_DECODERS(X, iq3_s, 8) REP_DECODERS(X, iq3_s, 16)

// The table a decoder reads: the global one, or for a decoder of copies (TableRep) the table as the
// kernel stages it (stage_table run by one thread, then shared_tab), read with the copy of lane
// threadIdx.x, which the callers set to the chunk's lane.
template <class F>
static Tab host_tab() {
    if constexpr (TableCopies<F>::N == 1) {
        return global_tab<F>();
    } else {
        static std::vector<uint32_t> staged;
        if (staged.empty()) {
            staged.resize(SharedTab<F>::WORDS);
            const unsigned lane = threadIdx.x;
            threadIdx.x = 0;
            stage_table<F>(staged.data());
            threadIdx.x = lane;
        }
        return shared_tab<F>(staged.data());
    }
}

// A sign-mask decoder's words with the signs applied (Chunk::m): the signed words a plain decoder gives.
template <class F>
static void signed_words(Chunk& c) {
    if constexpr (F::SIGN_MASKS)
        for (int i = 0; i < 8; ++i) c.w[i] = apply_signs((uint32_t)c.w[i], c.m[i]);
}

// D: the format whose dequantizer gives the values (F itself, or the format a decoder decodes).
template <class F, class D = F>
static void run(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& q, FILE* out) {
    const size_t n = blocks.size() / F::BYTES;
    std::vector<uint8_t> padded(blocks);
    padded.resize(blocks.size() + 16, 0);  // the tail slack the device buffers also have
    for (size_t b = 0; b < n; ++b) {
        for (int j = 0; j < F::CHUNKS; ++j) {
            const uint8_t* blk = padded.data() + b * F::BYTES;
            Chunk c;
            threadIdx.x = (unsigned)((b * F::CHUNKS + j) % 32);  // every copy of the table is read
            F::decode(blk, j, host_tab<F>(), c);
            float v[32];
            deq::Deq<D>::chunk(blk, j, v);
            int qw[8];
            memcpy(qw, q.data() + (b * F::CHUNKS + j) * 32, 32);
            const int isum = chunk_isum<F>(c, qw);
            const float isum_f = chunk_isum_f<F>(c, qw);
            signed_words<F>(c);
            fwrite(c.w, 4, 8, out);
            fwrite(&c.ls0, 4, 1, out);
            fwrite(&c.ls1, 4, 1, out);
            fwrite(&c.dw, 4, 1, out);
            fwrite(v, 4, 32, out);
            fwrite(&isum, 4, 1, out);
            fwrite(&isum_f, 4, 1, out);
        }
    }
}

template <class F>
static void dot(const std::vector<uint8_t>& w, int rows, int cols, const std::vector<uint8_t>& x, int n, FILE* out) {
    const int nchunks = cols / 32;
    const size_t row_bytes = (size_t)cols / F::QK * F::BYTES;
    std::vector<uint8_t> padded(w);
    padded.resize(w.size() + 16, 0);
    const block_q8_1* xb = reinterpret_cast<const block_q8_1*>(x.data());
    for (int c = 0; c < n; ++c) {
        for (int r = 0; r < rows; ++r) {
            float lanes[32];
            for (int l = 0; l < 32; ++l) {
                const LaneWalk<F> walk(l);
                float acc = 0.0f;
                for (int k = l, off = 0; k < nchunks; k += 32, off += LaneWalk<F>::STEP) {
                    Chunk ch;
                    threadIdx.x = (unsigned)l;
                    F::decode(padded.data() + r * row_bytes + walk.first + off, walk.j, host_tab<F>(), ch);
                    int q[8];
                    const float d_act = load_q8_1(xb + (size_t)c * nchunks + k, q);
                    acc = chunk_fma(ch, d_act, chunk_isum<F>(ch, q), acc);
                }
                lanes[l] = acc;
            }
            const float y = butterfly(lanes);
            fwrite(&y, 4, 1, out);
        }
    }
}

static int dot_main(int argc, char** argv) {
    const bool onecol = !strcmp(argv[1], "dot_onecol");
    if (argc != 9 + onecol) {
        fprintf(stderr, "usage: iq_host dot|dot_mma FORMAT ROWS COLS W.bin X.bin N OUT.bin (dot_onecol: then R)\n");
        return 2;
    }
    const char* f = argv[2];
    const int rows = atoi(argv[3]), cols = atoi(argv[4]), n = atoi(argv[7]);
    const std::vector<uint8_t> w = read_file(argv[5]);
    const std::vector<uint8_t> x = read_file(argv[6]);
    FILE* out = fopen(argv[8], "wb");
    if (!out) { perror(argv[8]); return 2; }
    if (onecol) {
        const bool ok = onecol_emul::dot_onecol(f, w, rows, cols, x, n, atoi(argv[9]), out);
        fclose(out);
        if (!ok) fprintf(stderr, "no one-column decoder for %s\n", f);
        return ok ? 0 : 2;
    }
    if (!strcmp(argv[1], "dot_mma")) {
        const int ok = dot_mma_main(f, w, rows, cols, x, n, out);
        fclose(out);
        return ok ? 0 : 2;
    }
#define DOT(name) if (!strcmp(f, #name)) dot<fmt_##name>(w, rows, cols, x, n, out); else
    DOT(q8_0) DOT(q2_0) DOT(iq4_nl) DOT(iq4_xs) DOT(iq2_xxs) DOT(iq2_xs) DOT(iq2_s)
#define DOT_DECODER(name, F, D) if (!strcmp(f, name)) dot<F>(w, rows, cols, x, n, out); else
    DOT(iq3_xxs) DOT(iq3_s) DOT(iq1_s) DOT(iq1_m) DECODERS(DOT_DECODER) { fprintf(stderr, "unknown format %s\n", f); return 2; }
    fclose(out);
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && (!strcmp(argv[1], "dot") || !strcmp(argv[1], "dot_mma") || !strcmp(argv[1], "dot_onecol")))
        return dot_main(argc, argv);
    if (argc != 5) { fprintf(stderr, "usage: iq_host FORMAT BLOCKS.bin Q.bin OUT.bin\n"); return 2; }
    const std::vector<uint8_t> blocks = read_file(argv[2]);
    const std::vector<uint8_t> q = read_file(argv[3]);
    FILE* out = fopen(argv[4], "wb");
    if (!out) { perror(argv[4]); return 2; }
    const char* f = argv[1];
#define FORMAT(name) if (!strcmp(f, #name)) run<fmt_##name>(blocks, q, out); else
    FORMAT(q8_0) FORMAT(q2_0) FORMAT(iq4_nl) FORMAT(iq4_xs) FORMAT(iq2_xxs) FORMAT(iq2_xs) FORMAT(iq2_s)
#define FORMAT_DECODER(name, F, D) if (!strcmp(f, name)) run<F, D>(blocks, q, out); else
    FORMAT(iq3_xxs) FORMAT(iq3_s) FORMAT(iq1_s) FORMAT(iq1_m) DECODERS(FORMAT_DECODER) { fprintf(stderr, "unknown format %s\n", f); return 2; }
    fclose(out);
    return 0;
}
