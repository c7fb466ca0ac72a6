// Host emulation of experiments/mmvq_onecol1m's kernel with iq1_m's selector-table decoder
// (kernels/onecol1m_dec.cuh): experiments/mmvq_onecol's driver (tests/onecol_host.cpp: the device row layout, the
// tables and activations staged as the kernel stages them, each lane's chain, the butterfly; its ONECOL_DEFECT
// names) included as it is, with this main.
// usage: onecol1m_host DECODER ROWS COLS W.bin X.bin N OUT.bin (DECODER: iq1_m:s64, iq1_m:s32)
#define main onecol_host_main
#include "onecol_host.cpp"
#undef main

#include "onecol1m_dec.cuh"

int main(int argc, char** argv) {
    if (argc != 8) { fprintf(stderr, "usage: onecol1m_host DECODER ROWS COLS W.bin X.bin N OUT.bin\n"); return 2; }
    const std::vector<uint8_t> w = read_file(argv[4]), x = read_file(argv[5]);
    const int rows = atoi(argv[2]), cols = atoi(argv[3]), n = atoi(argv[6]);
    FILE* out = fopen(argv[7], "wb");
    if (!out) { perror(argv[7]); return 2; }
    if (!strcmp(argv[1], "iq1_m:s64")) run<Iq1mSel<true>>(w, rows, cols, x, n, out);
    else if (!strcmp(argv[1], "iq1_m:s32")) run<Iq1mSel<false>>(w, rows, cols, x, n, out);
    else { fprintf(stderr, "unknown decoder %s\n", argv[1]); return 2; }
    fclose(out);
    return 0;
}
