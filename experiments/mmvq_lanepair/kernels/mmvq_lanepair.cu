// mmvq_lanepair.cu: the built-in mmvq_mma kernel (kernels_src/mmvq/mmvq_mma.cu, included as it is), compiled
// for iq1_s with the lane-pair fragment decoder (mmvq_mma<fmt_iq1_s_pair, TG, MINB, 1>: since issue 37 the
// product's, kernels_src/mmvq/mma_frag.cuh) and this experiment's control (mma_frag_lane.cuh:
// mmvq_mma<fmt_iq1_s_lane, ...>, each lane decodes both groups). The arithmetic contract is mmvq_mma.cu's;
// parity checks every variant bitwise against old.
#include "mma_frag_lane.cuh"
#include "mmvq/mmvq_mma.cu"
