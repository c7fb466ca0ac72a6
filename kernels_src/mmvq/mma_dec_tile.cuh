// mma_dec_tile.cuh: the per-warp shared-memory tile of mmvq_mma_dec.cu, where a warp's lanes leave the
// decoded chunks of one 8-chunk group (16 rows x 8 chunks) for the mma's A fragments. Host-compilable:
// tests/iq_host/mma_dec_emul.h writes and reads an emulated tile through these same offsets.
//
// Record (chunk i, row r), 48 bytes at rec(i, r) = i * CHUNK_STRIDE + r * REC:
//   bytes 0-15   Chunk words 0-3 (values 0-15), bytes 16-31 words 4-7 (values 16-31),
//   bytes 32-47  float dw, float(ls0), float(ls1), 0 (the decode's own values; ls is a small integer, so
//                its float is exact).
// Why these strides (no bank conflicts on either side; a 16-byte access is served 8 lanes at a time):
//   - stores: lanes 8k .. 8k+7 write the same row r of chunks i = 0..7 with STS.128; CHUNK_STRIDE = 784 =
//     6 * 128 + 16 puts them at 16 i (mod 128): 8 distinct 16-byte bank groups;
//   - ldmatrix.x4 reads one chunk: each of its 8x8 b16 matrices is 8 rows of 16 bytes at 48 r (mod 128) =
//     0, 48, 96, 16, 64, 112, 32, 80: distinct; the scale reads (rows g of one chunk, 4 lanes per address
//     broadcast) likewise.
#pragma once

namespace siq {

struct MmaDecTile {
    static constexpr int REC = 48;                     // bytes per (chunk, row) record
    static constexpr int CHUNK_STRIDE = 16 * REC + 16;  // 784: one chunk's 16 rows, padded
    static constexpr int BYTES = 8 * CHUNK_STRIDE;      // 6272 per warp
    static constexpr int SCALES = 32;                   // offset of (dw, ls0, ls1) in a record

    static __device__ __forceinline__ int rec(int i, int r) { return i * CHUNK_STRIDE + r * REC; }

    // The row address lane l gives ldmatrix.x4 for chunk i: matrix m = l / 8 holds rows 8 (m & 1) .. +7,
    // bytes 16 (m >> 1) .. +15, so lane 4g + t receives exactly the m16n8k32 .s8 A fragment (PTX ISA):
    // a0 = row g words t, a1 = row g + 8 word t, a2 = row g word 4 + t, a3 = row g + 8 word 4 + t.
    static __device__ __forceinline__ int ldmatrix_row(int i, int lane) {
        return rec(i, lane % 8 + 8 * ((lane / 8) & 1)) + 16 * (lane / 16);
    }
};

}  // namespace siq
