// mmvq_lanepair.cu: the built-in mmvq_mma kernel (kernels_src/mmvq/mmvq_mma.cu, included as it is), compiled
// for iq1_s with this experiment's fragment decoders (mma_frag_pair.cuh): mmvq_mma<fmt_iq1_s_pair, TG, MINB, 1>
// (the lane pair shares its selectors) and mmvq_mma<fmt_iq1_s_lane, ...> (the control: each lane decodes both
// groups). The arithmetic contract is mmvq_mma.cu's; parity checks every variant bitwise against old.
#include "mma_frag_pair.cuh"
#include "mmvq/mmvq_mma.cu"
