// mmvq_onecol.cu: experiments/mmvq_onecol's candidates in the product's one-column kernel, mmvq_onecol<D, R, MINB, U>
// (kernels_src/mmvq/mmvq_onecol.cu: its ARITHMETIC CONTRACT, schedule and activation staging, included as they are),
// with the product's decoders (Iq2xxsMul7, Iq1sTern) and this experiment's own (onecol_dec.cuh). README.md has the
// design.
#include "onecol_dec.cuh"
#include "mmvq/mmvq_onecol.cu"
