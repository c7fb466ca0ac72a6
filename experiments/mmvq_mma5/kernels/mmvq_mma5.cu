// mmvq_mma5.cu: the built-in mmvq_mma kernel (kernels_src/mmvq/mmvq_mma.cu, included as it is) with this
// experiment's candidates: mmvq_mma<fmt_iq3_xxs | fmt_iq3_s, TG, MINB, 1> and the split tags'
// fmt_<iq1_m | iq2_xs | iq2_s>_k16pair (since issue 37 the product's, kernels_src/mmvq/mma_frag.cuh and
// mma_frag_split.cuh), and the controls fmt_<format>_k16 (mma_frag5.cuh: the split formats per lane), whose
// mma_chunk is the product's two-m16n8k16 form (MMA_K16_CHUNK). The arithmetic contract is mmvq_mma.cu's with
// mma_frag_split.cuh's; parity checks every variant bitwise against old.
#include "mma_frag5.cuh"
#include "mmvq/mmvq_mma.cu"

// In the global namespace, with mmvq_mma.cu's mma_chunk (its `using namespace siq` is in effect).
#define MMA5_LANE_CHUNK(name) MMA_K16_CHUNK(fmt_##name##_k16)
MMA_SPLIT_FORMATS(MMA5_LANE_CHUNK)
#undef MMA5_LANE_CHUNK
