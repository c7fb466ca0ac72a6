// Host driver for the i-quant decoders (kernels_src/iq/iq_decode.cuh, dequant.cuh), compiled with a
// C++ compiler by tests/test_families_dequant.py.
// usage: iq_host FORMAT BLOCKS.bin Q.bin OUT.bin
//   BLOCKS.bin: n raw blocks of FORMAT; Q.bin: one int8 q8_1 code block (32 bytes) per chunk.
//   OUT.bin per chunk: int32 w[8], int32 ls0, int32 ls1, float dw, float dequant[32], int32 isum.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "iq/dequant.cuh"

using namespace siq;

static std::vector<uint8_t> read_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    std::vector<uint8_t> data;
    uint8_t buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
    fclose(f);
    return data;
}

template <class F>
static void run(const std::vector<uint8_t>& blocks, const std::vector<uint8_t>& q, FILE* out) {
    const size_t n = blocks.size() / F::BYTES;
    std::vector<uint8_t> padded(blocks);
    padded.resize(blocks.size() + 16, 0);  // the tail slack the device buffers also have
    for (size_t b = 0; b < n; ++b) {
        for (int j = 0; j < F::CHUNKS; ++j) {
            const uint8_t* blk = padded.data() + b * F::BYTES;
            Chunk c;
            F::decode(blk, j, F::table(), c);
            float v[32];
            deq::Deq<F>::chunk(blk, j, v);
            int qw[8];
            memcpy(qw, q.data() + (b * F::CHUNKS + j) * 32, 32);
            const int isum = chunk_isum(c, qw);
            fwrite(c.w, 4, 8, out);
            fwrite(&c.ls0, 4, 1, out);
            fwrite(&c.ls1, 4, 1, out);
            fwrite(&c.dw, 4, 1, out);
            fwrite(v, 4, 32, out);
            fwrite(&isum, 4, 1, out);
        }
    }
}

int main(int argc, char** argv) {
    if (argc != 5) { fprintf(stderr, "usage: iq_host FORMAT BLOCKS.bin Q.bin OUT.bin\n"); return 2; }
    const std::vector<uint8_t> blocks = read_file(argv[2]);
    const std::vector<uint8_t> q = read_file(argv[3]);
    FILE* out = fopen(argv[4], "wb");
    if (!out) { perror(argv[4]); return 2; }
    const char* f = argv[1];
#define FORMAT(name) if (!strcmp(f, #name)) run<fmt_##name>(blocks, q, out); else
    FORMAT(q8_0) FORMAT(q2_0) FORMAT(iq4_nl) FORMAT(iq4_xs) FORMAT(iq2_xxs) FORMAT(iq2_xs) FORMAT(iq2_s)
    FORMAT(iq3_xxs) FORMAT(iq3_s) FORMAT(iq1_s) FORMAT(iq1_m) { fprintf(stderr, "unknown format %s\n", f); return 2; }
    fclose(out);
    return 0;
}
