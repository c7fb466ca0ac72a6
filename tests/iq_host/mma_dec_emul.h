// mma_dec_emul.h: mmvq_mma_dec.cu's schedule on the CPU (the dot_mma_dec mode of iq_host.cpp), for every
// format, from the same decode.
//
// It mirrors the kernel step for step where the float result could depend on it:
//   - per 8-chunk group of warp q, lane l decodes (F::decode, the kernel's own) the row-chunks
//     (row 4 (l / 8) + j, chunk c0 + l % 8) of the clamped rows and writes them into an emulated warp tile
//     at MmaDecTile's offsets (kernels_src/mmvq/mma_dec_tile.cuh): words, dw, float(ls0), float(ls1);
//   - each lane's A fragment is read back as ldmatrix.x4 returns it: lane L gets, from matrix m, the 4
//     bytes at 4 (L % 4) of the row address lane 8m + L / 4 supplies (MmaDecTile::ldmatrix_row);
//   - ONE_SCALE: one emulated m16n8k32 (mma_emul.h); otherwise two m16n8k16 over {a0, a1} x b0 and
//     {a2, a3} x b1 (PTX ISA fragments: A reg i = row g + 8 i, k 4t..4t+3; B = k 4t..4t+3 of column g;
//     C as m16n8k32's), each from MMA_MAGIC, and the kernel's float isum (checked equal to
//     (float)chunk_isum<F> of the full decode: exit 3 otherwise);
//   - the chains and tree of mma_emul.h's dot_mma (warp q owns v = 8q + i; mma_tree).
// tests/families/test_mmvq_mma_dec.py compares its y bit for bit with the dot mode (mmvq_old's order).
#pragma once
#include "mma_emul.h"
#include "mmvq/mma_dec_tile.cuh"

namespace mma_dec_emul {

using siq::Chunk;
using siq::MmaDecTile;

// One m16n8k16 s8 x s8 -> s32 mma: a[lane][2], b[lane] (4 int8 per word), c[lane][4] from `init`.
inline void mma_m16n8k16(const uint32_t a[32][2], const uint32_t b[32], int init, int c[32][4]) {
    int8_t A[16][16], B[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int e = 0; e < 4; ++e) {
            A[g][4 * t + e] = (int8_t)(a[lane][0] >> (8 * e));
            A[g + 8][4 * t + e] = (int8_t)(a[lane][1] >> (8 * e));
            B[4 * t + e][g] = (int8_t)(b[lane] >> (8 * e));
        }
    }
    for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
            const int row = lane / 4 + 8 * (i >> 1), col = 2 * (lane % 4) + (i & 1);
            int s = init;
            for (int k = 0; k < 16; ++k) s += (int)A[row][k] * (int)B[k][col];
            c[lane][i] = s;
        }
}

inline uint32_t word_at(const uint8_t* p) {
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

inline float float_at(const uint8_t* p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}

// The kernel's float from an mma integer started at MMA_MAGIC (mmvq_mma_dec.cu's scaled()).
inline float scaled(int d, float ls) { return fmaf(__int_as_float(d), ls, -siq::MMA_BIAS * ls); }

// Warp q's group at chunk c0 of the tile at row0: the lanes' decode into `tile`, as decode_group does.
// full[i][r] keeps the full decode for the checks.
template <class F>
void decode_group(const uint8_t* w, size_t row_bytes, int rows, int row0, int c0, int nchunks, uint8_t* tile,
                  Chunk (&full)[8][16]) {
    for (int lane = 0; lane < 32; ++lane) {
        const int i = lane % 8, c = c0 + i;
        if (c >= nchunks) continue;
        for (int k = 0; k < 4; ++k) {
            const int r = 4 * (lane / 8) + k, row = row0 + r < rows ? row0 + r : rows - 1;
            Chunk& ch = full[i][r];
            F::decode(w + row * row_bytes + (size_t)(c / F::CHUNKS) * F::BYTES, c % F::CHUNKS, siq::global_tab<F>(),
                      ch);
            uint8_t* rec = tile + MmaDecTile::rec(i, r);
            memcpy(rec, ch.w, 32);
            const float s[4] = {ch.dw, (float)ch.ls0, (float)ch.ls1, 0.0f};
            memcpy(rec + MmaDecTile::SCALES, s, 16);
        }
    }
}

// The chunk's isum floats of every lane (isum[lane][e], C reg e), read from the tile as the kernel does.
template <class F>
void chunk_isums(const uint8_t* tile, int i, const uint32_t fb[32][2], float isum[32][4]) {
    uint32_t fa[32][4];
    for (int lane = 0; lane < 32; ++lane)
        for (int m = 0; m < 4; ++m)
            fa[lane][m] = word_at(tile + MmaDecTile::ldmatrix_row(i, 8 * m + lane / 4) + 4 * (lane % 4));
    int lo[32][4], hi[32][4];
    if constexpr (F::ONE_SCALE) {
        int c[32][4];
        mma_emul::mma_m16n8k32(fa, fb, c);
        for (int lane = 0; lane < 32; ++lane)
            for (int e = 0; e < 4; ++e) lo[lane][e] = siq::MMA_MAGIC + c[lane][e];
    } else {
        uint32_t a0[32][2], a1[32][2], b0[32], b1[32];
        for (int lane = 0; lane < 32; ++lane) {
            a0[lane][0] = fa[lane][0], a0[lane][1] = fa[lane][1], b0[lane] = fb[lane][0];
            a1[lane][0] = fa[lane][2], a1[lane][1] = fa[lane][3], b1[lane] = fb[lane][1];
        }
        mma_m16n8k16(a0, b0, siq::MMA_MAGIC, lo);
        mma_m16n8k16(a1, b1, siq::MMA_MAGIC, hi);
    }
    for (int lane = 0; lane < 32; ++lane)
        for (int e = 0; e < 4; ++e) {
            const uint8_t* rec = tile + MmaDecTile::rec(i, lane / 4 + 8 * (e >> 1)) + MmaDecTile::SCALES;
            const float ls0 = float_at(rec + 4), ls1 = float_at(rec + 8);
            isum[lane][e] = F::ONE_SCALE ? scaled(lo[lane][e], ls0) : scaled(lo[lane][e], ls0) + scaled(hi[lane][e], ls1);
        }
}

// y[n][rows] as mmvq_mma_dec computes it (tiles of 16 rows x 8 columns; missing columns: zero codes).
template <class F>
void dot_mma_dec(const uint8_t* w, size_t row_bytes, int rows, int nchunks, const block_q8_1* xb, int n, float* y) {
    std::vector<uint8_t> tile(MmaDecTile::BYTES);
    for (int col0 = 0; col0 < n; col0 += 8)
        for (int row0 = 0; row0 < rows; row0 += 16) {
            std::vector<float> a(16 * 8 * 32, 0.0f);  // a[(r * 8 + col) * 32 + v]
            for (int q = 0; q < 4; ++q)
                for (int c0 = 8 * q; c0 < nchunks; c0 += 32) {
                    Chunk full[8][16];
                    decode_group<F>(w, row_bytes, rows, row0, c0, nchunks, tile.data(), full);
                    for (int i = 0; i < 8 && c0 + i < nchunks; ++i) {
                        const int c = c0 + i, v = 8 * q + i;
                        int qw[8][8];
                        float d_act[8];
                        mma_emul::load_columns(xb, nchunks, col0, n, c, qw, d_act);
                        uint32_t fb[32][2];
                        for (int lane = 0; lane < 32; ++lane)
                            fb[lane][0] = (uint32_t)qw[lane / 4][lane % 4], fb[lane][1] = (uint32_t)qw[lane / 4][4 + lane % 4];
                        float isum[32][4];
                        chunk_isums<F>(tile.data(), i, fb, isum);
                        for (int lane = 0; lane < 32; ++lane)
                            for (int e = 0; e < 4; ++e) {
                                const int r = lane / 4 + 8 * (e >> 1), col = 2 * (lane % 4) + (e & 1);
                                const Chunk& ch = full[i][r];
                                if (isum[lane][e] != (float)siq::chunk_isum<F>(ch, qw[col])) {
                                    fprintf(stderr, "dot_mma_dec: isum != chunk_isum at row %d chunk %d\n", row0 + r, c);
                                    exit(3);
                                }
                                const float dw = float_at(tile.data() + MmaDecTile::rec(i, r) + MmaDecTile::SCALES);
                                float& acc = a[(r * 8 + col) * 32 + v];
                                acc = fmaf(dw * d_act[col], isum[lane][e], acc);
                            }
                    }
                }
            for (int r = 0; r < 16 && row0 + r < rows; ++r)
                for (int col = 0; col < 8 && col0 + col < n; ++col)
                    y[(size_t)(col0 + col) * rows + row0 + r] = mma_emul::mma_tree(&a[(r * 8 + col) * 32]);
        }
}

}  // namespace mma_dec_emul

// The dot_mma_dec mode, every format; false for an unknown one.
inline bool dot_mma_dec_main(const char* f, const std::vector<uint8_t>& w, int rows, int cols,
                             const std::vector<uint8_t>& x, int n, FILE* out) {
    const int nchunks = cols / 32;
    std::vector<uint8_t> padded(w);
    padded.resize(w.size() + 16, 0);
    const block_q8_1* xb = reinterpret_cast<const block_q8_1*>(x.data());
    std::vector<float> y((size_t)n * rows);
#define MMA_DEC(name)                                                                                        \
    if (!strcmp(f, #name))                                                                                   \
        mma_dec_emul::dot_mma_dec<siq::fmt_##name>(padded.data(), (size_t)cols / siq::fmt_##name::QK *       \
                                                   siq::fmt_##name::BYTES, rows, nchunks, xb, n, y.data()); \
    else
    MMA_DEC(q8_0) MMA_DEC(q2_0) MMA_DEC(iq4_nl) MMA_DEC(iq4_xs) MMA_DEC(iq2_xxs) MMA_DEC(iq2_xs) MMA_DEC(iq2_s)
    MMA_DEC(iq3_xxs) MMA_DEC(iq3_s) MMA_DEC(iq1_s) MMA_DEC(iq1_m) {
        fprintf(stderr, "dot_mma_dec: unknown format %s\n", f);
        return false;
    }
#undef MMA_DEC
    fwrite(y.data(), 4, y.size(), out);
    return true;
}
