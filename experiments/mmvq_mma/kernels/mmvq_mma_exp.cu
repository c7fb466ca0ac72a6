// mmvq_mma_exp.cu: the built-in mmvq_mma kernel (kernels_src/mmvq/mmvq_mma.cu, included as it is) with this
// experiment's additions, so that its variants compile mmvq_mma<F, TG, MINB, S> for what `new` never runs:
// the fragment decoders of iq2_xxs and iq1_s (mma_frag_grid.cuh) and the cp.async weight stages S >= 2
// (mma_stages.cuh). The arithmetic contract is mmvq_mma.cu's; parity checks every variant bitwise against old.
#include "mma_frag_grid.cuh"
#include "mmvq/mmvq_mma.cu"
#include "mma_stages.cuh"
