// mmvq_onecol3.cu: the product's one-column kernel, mmvq_onecol<D, R, MINB, U> (kernels_src/mmvq/mmvq_onecol.cu: its
// ARITHMETIC CONTRACT, schedule and activation staging, included as they are; it came from experiments/mmvq_onecol),
// run with iq3_xxs's mul7 decoder (onecol3_dec.cuh: onecol::Iq3xxsMul7<N>). experiments/mmvq_onecol3/README.md has
// the design.
#include "onecol3_dec.cuh"
#include "mmvq/mmvq_onecol.cu"
