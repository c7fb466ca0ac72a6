// mmvq_lanepair.cu: the built-in mmvq_mma kernel (kernels_src/mmvq/mmvq_mma.cu, included as it is), compiled
// with the lane-pair fragment decoders of iq1_s and iq2_xxs (mmvq_mma<fmt_<format>_pair, TG, MINB, 1>: since
// issue 37 the product's, kernels_src/mmvq/mma_frag.cuh) and their controls (fmt_<format>_lane,
// mma_frag_lane.cuh: each lane decodes both groups). The arithmetic contract is mmvq_mma.cu's; parity checks
// every variant bitwise against old.
#include "mma_frag_lane.cuh"
#include "mmvq/mmvq_mma.cu"
