// mmvq_lanepair.cu: the built-in mmvq_mma kernel (kernels_src/mmvq/mmvq_mma.cu, included as it is), compiled
// with lane-pair fragment decoders: iq1_s's (mmvq_mma<fmt_iq1_s_pair, TG, MINB, 1>: since issue 37 the
// product's, kernels_src/mmvq/mma_frag.cuh) and iq2_xxs's (mma_frag_iq2xxs.cuh, a candidate), and their
// controls (fmt_iq1_s_lane, mma_frag_lane.cuh; fmt_iq2_xxs_lane: each lane decodes both groups). The
// arithmetic contract is mmvq_mma.cu's; parity checks every variant bitwise against old.
#include "mma_frag_lane.cuh"
#include "mma_frag_iq2xxs.cuh"
#include "mmvq/mmvq_mma.cu"
