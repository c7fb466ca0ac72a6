// Host emulation of experiments/mmvq_onecol3's kernel with iq3_xxs's mul7 decoder (kernels/onecol3_dec.cuh):
// experiments/mmvq_onecol's driver (tests/onecol_host.cpp: the device row layout, the tables and activations staged
// as the kernel stages them, each lane's chain, the butterfly; its ONECOL_DEFECT names) included as it is, with
// this main.
// usage: onecol3_host DECODER ROWS COLS W.bin X.bin N OUT.bin (DECODER: iq3_xxs:mul7, iq3_xxs:mul7x16)
#define main onecol_host_main
#include "onecol_host.cpp"
#undef main

#include "onecol3_dec.cuh"

int main(int argc, char** argv) {
    if (argc != 8) { fprintf(stderr, "usage: onecol3_host DECODER ROWS COLS W.bin X.bin N OUT.bin\n"); return 2; }
    const std::vector<uint8_t> w = read_file(argv[4]), x = read_file(argv[5]);
    const int rows = atoi(argv[2]), cols = atoi(argv[3]), n = atoi(argv[6]);
    FILE* out = fopen(argv[7], "wb");
    if (!out) { perror(argv[7]); return 2; }
    if (!strcmp(argv[1], "iq3_xxs:mul7")) run<Iq3xxsMul7<1>>(w, rows, cols, x, n, out);
    else if (!strcmp(argv[1], "iq3_xxs:mul7x16")) run<Iq3xxsMul7<16>>(w, rows, cols, x, n, out);
    else { fprintf(stderr, "unknown decoder %s\n", argv[1]); return 2; }
    fclose(out);
    return 0;
}
