// Helpers of the host drivers (tests/iq_host/iq_host.cpp, experiments' own, e.g. experiments/mmvq_onecol/tests/
// onecol_host.cpp): reading an input file whole, and warp_sum_f32's butterfly over 32 lane values.
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

static inline std::vector<uint8_t> read_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    std::vector<uint8_t> data;
    uint8_t buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
    fclose(f);
    return data;
}

// The butterfly of warp_sum_f32: every lane adds its xor partner's value, offsets 16, 8, 4, 2, 1.
static inline float butterfly(float v[32]) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        float next[32];
        for (int l = 0; l < 32; ++l) next[l] = v[l] + v[l ^ offset];
        memcpy(v, next, sizeof next);
    }
    return v[0];
}
