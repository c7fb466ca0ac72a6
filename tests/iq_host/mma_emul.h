// mma_emul.h: mmvq_mma.cu's schedule on the CPU (the dot_mma mode of iq_host.cpp), from the same decode.
//
// It mirrors the kernel step for step where the float result could depend on it:
//   - each lane's A words, dw and ls come from MmaFrag<F> (kernels_src/mmvq/mma_frag.cuh), the kernel's own
//     fragment decoder, checked here against the format's full decode() (exit 3 on any difference);
//   - the float of each integer as the kernel gets it (isum_float_ls of the mma started at MMA_MAGIC), checked
//     equal to (float)(ls * C) (exit 3 otherwise);
//   - the integer of chunk c for 16 rows x 8 columns comes from an emulated
//     mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32, whose A and B fragments are filled exactly as the
//     kernel fills them (lane = 4g + t: A = Chunk words t and 4 + t of rows g and g + 8, B = q8_1 words t
//     and 4 + t of column g) and whose C is read back through the PTX fragment layout (PTX ISA, "Matrix
//     fragments for mma.m16n8k32", .s8 A/B and .s32 C);
//   - warp q (0..3) of a tile owns the virtual lanes v = 8q + i (i < 8), the chunks c = v, v + 32, ... in
//     increasing c, one fmaf chain per (v, row, column) started at 0.0f;
//   - the 32 chains of an output are combined with warp_sum_f32's tree at lane 0, split across the warps
//     as mmvq_mma.cu splits it (mma_tree below).
// tests/families/test_mmvq_mma.py compares its y bit for bit with the dot mode (mmvq_old's arithmetic).
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "mmvq/mma_frag.cuh"
#include "mmvq/mma_frag_split.cuh"  // the split tags (two k16 mmas a chunk)

namespace mma_emul {

using siq::Chunk;

// A defect planted in one tail path of the schedule (tests/families/test_mmvq_mma_tails.py: the default parity
// cases must expose each), from $MMA_EMUL_DEFECT: "tail_tile" computes whole 16-row tiles only (the kernel's
// tiles = rows / 16), "partial_group" drops a row's last 8-chunk group when it is partial (c0 + 8 > nchunks),
// "partial_round" drops the chunks past the last multiple of 32 (the warps' groups of an unfinished round).
enum class Defect { none, tail_tile, partial_group, partial_round };

inline Defect planted_defect() {
    const char* name = getenv("MMA_EMUL_DEFECT");
    if (name == nullptr || !*name) return Defect::none;
    if (!strcmp(name, "tail_tile")) return Defect::tail_tile;
    if (!strcmp(name, "partial_group")) return Defect::partial_group;
    if (!strcmp(name, "partial_round")) return Defect::partial_round;
    fprintf(stderr, "dot_mma: unknown MMA_EMUL_DEFECT %s\n", name);
    exit(2);
}

// One m16n8k32 s8 x s8 -> s32 mma over a warp's fragments: a[lane][4], b[lane][2] (4 int8 per word), c[lane][4].
// PTX layout, g = lane / 4, t = lane % 4: A reg i (i < 4) holds row g + 8 * (i & 1), k = 16 * (i >> 1) + 4t .. +3;
// B reg i holds k = 16 * i + 4t .. +3 of column g; C reg i holds row g + 8 * (i >> 1), column 2t + (i & 1).
inline void mma_m16n8k32(const uint32_t a[32][4], const uint32_t b[32][2], int c[32][4]) {
    int8_t A[16][32], B[32][8];
    for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; ++i)
            for (int e = 0; e < 4; ++e) A[g + 8 * (i & 1)][16 * (i >> 1) + 4 * t + e] = (int8_t)(a[lane][i] >> (8 * e));
        for (int i = 0; i < 2; ++i)
            for (int e = 0; e < 4; ++e) B[16 * i + 4 * t + e][g] = (int8_t)(b[lane][i] >> (8 * e));
    }
    for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 4; ++i) {
            const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
            int s = 0;
            for (int k = 0; k < 32; ++k) s += (int)A[row][k] * (int)B[k][col];
            c[lane][i] = s;
        }
    }
}

// Chunk c of the 8 columns col0 .. col0 + 7 of q8_1 blocks xb (column-major, nchunks a column): codes and
// d, as the kernel stages them; columns at or past n are zero codes with d = 0 (the kernel does not store
// their outputs).
inline void load_columns(const block_q8_1* xb, int nchunks, int col0, int n, int c, int (&qw)[8][8],
                         float (&d_act)[8]) {
    for (int col = 0; col < 8; ++col) {
        if (col0 + col < n) {
            d_act[col] = siq::load_q8_1(xb + (size_t)(col0 + col) * nchunks + c, qw[col]);
        } else {
            memset(qw[col], 0, sizeof qw[col]);
            d_act[col] = 0.0f;
        }
    }
}

// A split format (a tag with MMA_K16, mma_frag_split.cuh: the product's fmt_<format>_k16pair, experiments/mmvq_mma5's
// per-lane fmt_<format>_k16): the kernel runs two m16n8k16 mmas a chunk, words t (values 0-15, ls0) and words
// 4 + t (values 16-31, ls1), MmaFrag<F>::ls1 gives ls1 and MmaFrag<F>::isum_float the float of ls0 C0 + ls1 C1 from
// the two integers (checked against (float)isum). For any other format ls1 is the fragment's one ls (decode()'s ls1
// must equal it) and one m16n8k32 runs.
template <class F, class = void>
struct Split {
    static constexpr bool value = false;
    static int ls1(const uint8_t*, int, const siq::Frag& f) { return f.ls; }
    static float isum_float(int, int, int, int) { return 0.0f; }  // not called: one mma, isum_float_ls
};
template <class F>
struct Split<F, decltype((void)F::MMA_K16)> {
    static constexpr bool value = F::MMA_K16;
    static int ls1(const uint8_t* b, int j, const siq::Frag&) { return siq::MmaFrag<F>::ls1(b, j); }
    static float isum_float(int c0, int c1, int ls0, int ls1) { return siq::MmaFrag<F>::isum_float(c0, c1, ls0, ls1); }
};

// The two m16n8k16 mmas of a split chunk from the m16n8k32 fragments: m16n8k16's A regs 0, 1 and B reg 0 are
// m16n8k32's A regs 0, 1 and B reg 0 (k 4t..4t+3, rows g and g + 8), so c0 is m16n8k32 with regs 2, 3 (k >= 16)
// zero, and c1 (the mma over words 4 + t) the same with regs 0, 1 zero.
inline void mma_halves(const uint32_t a[32][4], const uint32_t b[32][2], int c0[32][4], int c1[32][4]) {
    uint32_t lo[32][4], hi[32][4];
    for (int lane = 0; lane < 32; ++lane) {
        for (int i = 0; i < 4; ++i) {
            lo[lane][i] = i < 2 ? a[lane][i] : 0u;
            hi[lane][i] = i < 2 ? 0u : a[lane][i];
        }
    }
    mma_m16n8k32(lo, b, c0);
    mma_m16n8k32(hi, b, c1);
}

// warp_sum_f32's value at lane 0 from the 32 lanes' a[v], with the tree cut where mmvq_mma.cu cuts it:
// warp q holds a[8q .. 8q+7]. Level 1 (xor 16) pairs v with v + 16: warps 0+2 and 1+3; level 2 (xor 8)
// pairs s1[l] with s1[l + 8]: warp 0's with warp 1's; levels 3-5 (xor 4, 2, 1) stay in warp 0's registers.
inline float mma_tree(const float a[32]) {
    float s1[16], s2[8], s3[4], s4[2];
    for (int l = 0; l < 16; ++l) s1[l] = a[l] + a[l + 16];
    for (int l = 0; l < 8; ++l) s2[l] = s1[l] + s1[l + 8];
    for (int l = 0; l < 4; ++l) s3[l] = s2[l] + s2[l + 4];
    for (int l = 0; l < 2; ++l) s4[l] = s3[l] + s3[l + 2];
    return s4[0] + s4[1];
}

// Warp q's group c0 of the tile at row0 as the kernel's buffer holds it (load_group + store_group): for
// each of the 16 rows (clamped) its U4 granules from MmaGroup<F>::granule, those wholly past the row's
// end left as they were (stale: the fill byte, which no chunk below nchunks may read). Each granule must
// be 16-aligned (the kernel's uint4 loads and cp.async need it; exit 3 otherwise), so a head that is not
// the group's offset in its granule cannot pass by copying from the group's own start.
template <class F>
void copy_group(const uint8_t* w, size_t row_stride, int rows, int row0, int c0, int row_bytes, uint8_t* buf) {
    using G = siq::MmaGroup<F>;
    memset(buf, 0xA5, 16 * G::ROW);
    for (int r = 0; r < 16; ++r) {
        const int row = row0 + r < rows ? row0 + r : rows - 1;
        for (int u = 0; u < G::U4; ++u) {
            const int off = G::granule(c0, u);
            if (off % 16 != 0 || row_stride % 16 != 0) {
                fprintf(stderr, "dot_mma: granule %d of group %d at row offset %d, not 16-aligned\n", u, c0, off);
                exit(3);
            }
            if (off < row_bytes) memcpy(buf + 16 * G::slot(r * G::U4 + u), w + (size_t)row * row_stride + off, 16);
        }
    }
}

// y[n][rows] for `rows` rows of raw blocks (row_stride bytes apart, a multiple of 16 as the kernel's
// weights, 16 readable bytes after the last) and n columns of q8_1 blocks, in tiles of 16 rows (clamped
// reads, only real rows kept) x 8 columns (missing columns: zero codes, never stored). The fragments are
// read from the copied group at the kernel's offsets (buffer + head + ROW r + block), the full decode
// from the weights themselves.
template <class F>
void dot_mma(const uint8_t* w, size_t row_stride, int rows, int nchunks, const block_q8_1* xb, int n, float* y) {
    static_assert(F::ONE_SCALE, "mmvq_mma: one scale per chunk");
    using G = siq::MmaGroup<F>;
    const int row_bytes = nchunks / F::CHUNKS * F::BYTES;
    uint32_t kv[4];
    siq::frag_table<F>(F::table(), kv);
    const siq::Tab tab = siq::global_tab<F>();
    alignas(16) static uint8_t buf[16 * G::ROW];
    const Defect defect = planted_defect();
    const int last_row0 = defect == Defect::tail_tile ? rows - 16 : rows - 1;  // the last tile computed
    for (int col0 = 0; col0 < n; col0 += 8) {
        for (int row0 = 0; row0 <= last_row0; row0 += 16) {
            std::vector<float> a(16 * 8 * 32, 0.0f);  // a[(r * 8 + col) * 32 + v]: the virtual lanes' chains
            for (int q = 0; q < 4; ++q) {              // the tile's 4 warps, any order: they share nothing
                for (int s = 0; 32 * s < nchunks; ++s) {
                    const int c0 = 32 * s + 8 * q;
                    if (c0 >= nchunks) break;
                    if (defect == Defect::partial_group && c0 + 8 > nchunks) break;
                    if (defect == Defect::partial_round && 32 * (s + 1) > nchunks) break;
                    copy_group<F>(w, row_stride, rows, row0, c0, row_bytes, buf);
                    const uint8_t* group = buf + G::head(c0);
                    for (int i = 0; i < 8; ++i) {
                        const int c = c0 + i, v = 8 * q + i, j = i % F::CHUNKS;
                        if (c >= nchunks) break;
                        Chunk ch[16];
                        const uint8_t* blk[16];  // the kernel's fragment address of row r's block
                        for (int r = 0; r < 16; ++r) {
                            const int row = row0 + r < rows ? row0 + r : rows - 1;  // clamped, as the kernel reads
                            blk[r] = group + r * G::ROW + (i / F::CHUNKS) * F::BYTES;
                            F::decode(w + (size_t)row * row_stride + (size_t)(c / F::CHUNKS) * F::BYTES, j,
                                      siq::global_tab<F>(), ch[r]);
                        }
                        int qw[8][8];
                        float d_act[8];
                        load_columns(xb, nchunks, col0, n, c, qw, d_act);
                        uint32_t fa[32][4], fb[32][2];
                        int fc[32][4];
                        siq::Frag fr[32][2];  // lane's rows g and g + 8
                        for (int lane = 0; lane < 32; ++lane) {
                            const int g = lane / 4, t = lane % 4;
                            for (int h = 0; h < 2; ++h) {
                                fr[lane][h] = siq::MmaFrag<F>::load(blk[g + 8 * h], j, t, kv, tab);
                                const Chunk& full = ch[g + 8 * h];
                                if (fr[lane][h].lo != full.w[t] || fr[lane][h].hi != full.w[4 + t] ||
                                    fr[lane][h].dw != full.dw || fr[lane][h].ls != full.ls0 ||
                                    Split<F>::ls1(blk[g + 8 * h], j, fr[lane][h]) != full.ls1) {
                                    fprintf(stderr, "dot_mma: MmaFrag != decode at row %d chunk %d lane %d\n",
                                            row0 + g + 8 * h, c, lane);
                                    exit(3);
                                }
                            }
                            fa[lane][0] = (uint32_t)fr[lane][0].lo;
                            fa[lane][1] = (uint32_t)fr[lane][1].lo;
                            fa[lane][2] = (uint32_t)fr[lane][0].hi;
                            fa[lane][3] = (uint32_t)fr[lane][1].hi;
                            fb[lane][0] = (uint32_t)qw[g][t];
                            fb[lane][1] = (uint32_t)qw[g][4 + t];
                        }
                        int fc1[32][4];  // a split format's second k16 mma (values 16-31)
                        if (Split<F>::value) {
                            mma_halves(fa, fb, fc, fc1);
                        } else {
                            mma_m16n8k32(fa, fb, fc);
                        }
                        for (int lane = 0; lane < 32; ++lane) {
                            const int t = lane % 4;
                            for (int e = 0; e < 4; ++e) {
                                const siq::Frag& f = fr[lane][e >> 1];  // C reg e: row g + 8 * (e >> 1)
                                const int r = lane / 4 + 8 * (e >> 1), col = 2 * t + (e & 1);
                                float& acc = a[(r * 8 + col) * 32 + v];
                                const int ls1 = Split<F>::ls1(blk[r], j, f);
                                const float isum = Split<F>::value ? (float)(f.ls * fc[lane][e] + ls1 * fc1[lane][e])
                                                                   : (float)(f.ls * fc[lane][e]);
                                // the kernel's float: the mma started at MMA_MAGIC, then isum_float_ls; a split
                                // format's from the two mmas' integers (started at 0) by its MmaFrag's isum_float
                                const float kernel = Split<F>::value
                                    ? Split<F>::isum_float(fc[lane][e], fc1[lane][e], f.ls, ls1)
                                    : siq::isum_float_ls(siq::MMA_MAGIC + fc[lane][e], f.ls);
                                if (kernel != isum || siq::small_int_float(f.ls) != (float)f.ls) {
                                    fprintf(stderr, "dot_mma: isum_float_ls != (float)isum at chunk %d\n", c);
                                    exit(3);
                                }
                                acc = fmaf(f.dw * d_act[col], isum, acc);
                            }
                        }
                    }
                }
            }
            for (int r = 0; r < 16 && row0 + r < rows; ++r)
                for (int col = 0; col < 8 && col0 + col < n; ++col)
                    y[(size_t)(col0 + col) * rows + row0 + r] = mma_tree(&a[(r * 8 + col) * 32]);
        }
    }
}

}  // namespace mma_emul

// The kernel's weights: rows at a 16-byte multiple stride (strata_bench's row_stride), 16 bytes after.
inline std::vector<uint8_t> strided_rows(const std::vector<uint8_t>& w, int rows, size_t row_bytes, size_t stride) {
    std::vector<uint8_t> out(rows * stride + 16, 0);
    for (int r = 0; r < rows; ++r) memcpy(out.data() + r * stride, w.data() + r * row_bytes, row_bytes);
    return out;
}

template <class F>
void dot_mma_format(const std::vector<uint8_t>& w, int rows, int cols, const block_q8_1* xb, int n, float* y) {
    const size_t row_bytes = (size_t)cols / F::QK * F::BYTES, stride = (row_bytes + 15) / 16 * 16;
    const std::vector<uint8_t> ws = strided_rows(w, rows, row_bytes, stride);
    mma_emul::dot_mma<F>(ws.data(), stride, rows, cols / 32, xb, n, y);
}

// An experiment's formats with an MmaFrag of their own (its header included first, harness.binary), e.g.
// -D'MMA_EMUL_EXTRA_FORMATS(X)=X(iq3_xxs)' -D'MMA_EMUL_EXTRA_NAMES=", iq3_xxs"'.
#ifndef MMA_EMUL_EXTRA_FORMATS
#define MMA_EMUL_EXTRA_FORMATS(X)
#endif
// Formats run with a tag of another name (an experiment's decoder variant), e.g.
// -D'MMA_EMUL_EXTRA_TAGS(X)=X(iq2_xs, fmt_iq2_xs_k16)'.
#ifndef MMA_EMUL_EXTRA_TAGS
#define MMA_EMUL_EXTRA_TAGS(X)
#endif
#ifndef MMA_EMUL_EXTRA_NAMES
#define MMA_EMUL_EXTRA_NAMES ""
#endif

// The fragment decoders of the formats `new` runs on the tensor cores: kernels_src's lane pairs (fmt_iq1_s_pair,
// fmt_iq2_xxs_pair; the split tags fmt_<iq1_m | iq2_xs | iq2_s>_k16pair) and the format's own MmaFrag for the
// others; an experiment names another format tag (experiments/mmvq_lanepair's controls fmt_*_lane,
// experiments/mmvq_mma's per-lane fmt_iq1_s and fmt_iq2_xxs, experiments/mmvq_mma5's per-lane fmt_*_k16).
#ifndef MMA_EMUL_IQ1_S
#define MMA_EMUL_IQ1_S fmt_iq1_s_pair
#endif
#ifndef MMA_EMUL_IQ2_XXS
#define MMA_EMUL_IQ2_XXS fmt_iq2_xxs_pair
#endif
#ifndef MMA_EMUL_IQ1_M
#define MMA_EMUL_IQ1_M fmt_iq1_m_k16pair
#endif
#ifndef MMA_EMUL_IQ2_XS
#define MMA_EMUL_IQ2_XS fmt_iq2_xs_k16pair
#endif
#ifndef MMA_EMUL_IQ2_S
#define MMA_EMUL_IQ2_S fmt_iq2_s_k16pair
#endif
#define MMA_EMUL_BUILTIN_TAGS(X)                                                                  \
    X(iq4_nl, fmt_iq4_nl) X(q8_0, fmt_q8_0) X(iq4_xs, fmt_iq4_xs) X(iq1_s, MMA_EMUL_IQ1_S)       \
    X(iq2_xxs, MMA_EMUL_IQ2_XXS) X(iq1_m, MMA_EMUL_IQ1_M) X(iq2_xs, MMA_EMUL_IQ2_XS)             \
    X(iq2_s, MMA_EMUL_IQ2_S) X(iq3_xxs, fmt_iq3_xxs) X(iq3_s, fmt_iq3_s)
#define MMA_EMUL_BUILTIN_NAMES "iq4_nl, q8_0, iq4_xs, iq1_s, iq2_xxs, iq1_m, iq2_xs, iq2_s, iq3_xxs, iq3_s"

// The dot_mma mode for the formats mmvq_mma exists for (kernels_src's, and an experiment's); false for any other.
inline bool dot_mma_main(const char* f, const std::vector<uint8_t>& w, int rows, int cols,
                         const std::vector<uint8_t>& x, int n, FILE* out) {
    const block_q8_1* xb = reinterpret_cast<const block_q8_1*>(x.data());
    std::vector<float> y((size_t)n * rows);
    if (false) {
#define MMA_EMUL_TAG(name, tag) \
    } else if (!strcmp(f, #name)) { \
        dot_mma_format<siq::tag>(w, rows, cols, xb, n, y.data());
    MMA_EMUL_BUILTIN_TAGS(MMA_EMUL_TAG)
    MMA_EMUL_EXTRA_TAGS(MMA_EMUL_TAG)
#define MMA_EMUL_FORMAT(name) MMA_EMUL_TAG(name, fmt_##name)
    MMA_EMUL_EXTRA_FORMATS(MMA_EMUL_FORMAT)
    } else {
        fprintf(stderr, "dot_mma: no mma schedule for %s (" MMA_EMUL_BUILTIN_NAMES "%s)\n", f, MMA_EMUL_EXTRA_NAMES);
        return false;
    }
    fwrite(y.data(), 4, y.size(), out);
    return true;
}
