// Host emulation of experiments/mmvq_onecol1m's kernel with iq1_m's selector-table decoder
// (kernels_src/mmvq/onecol_dec_iq1m.cuh): experiments/mmvq_onecol's driver (tests/onecol_host.cpp: the device row
// layout, the tables and activations staged as the kernel stages them, each lane's chain, the butterfly; its ONECOL_DEFECT
// names) included as it is, with this main.
// usage: onecol1m_host DECODER ROWS COLS W.bin X.bin N OUT.bin (DECODER: iq1_m:s64, iq1_m:s32)
#define main onecol_host_main
#include "onecol_host.cpp"
#undef main

#include "mmvq/onecol_dec_iq1m.cuh"

int main(int argc, char** argv) {
    if (argc != 8) { fprintf(stderr, "usage: onecol1m_host DECODER ROWS COLS W.bin X.bin N OUT.bin\n"); return 2; }
    const bool wide = !strcmp(argv[1], "iq1_m:s64");
    if (!wide && strcmp(argv[1], "iq1_m:s32")) { fprintf(stderr, "unknown decoder %s\n", argv[1]); return 2; }
    FILE* out = fopen(argv[7], "wb");
    if (!out) { perror(argv[7]); return 2; }
    (wide ? run<Iq1mSel<true>> : run<Iq1mSel<false>>)(read_file(argv[4]), atoi(argv[2]), atoi(argv[3]),
                                                     read_file(argv[5]), atoi(argv[6]), out);
    fclose(out);
    return 0;
}
