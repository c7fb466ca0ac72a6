// mmvq_onecol3.cu: experiments/mmvq_onecol's one-column kernel, mmvq_onecol<D, R, MINB, U> (its ARITHMETIC
// CONTRACT, schedule and activation staging, included as they are), run with iq3_xxs's mul7 decoder
// (onecol3_dec.cuh: onecol::Iq3xxsMul7<N>). experiments/mmvq_onecol3/README.md has the design.
#include "onecol3_dec.cuh"
#include "../../mmvq_onecol/kernels/mmvq_onecol.cu"
