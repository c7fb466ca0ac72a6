// mma_frag5.cuh: the controls of experiments/mmvq_mma5 (issue 37 item 1). The measured winners are the
// product's since issue 37: iq3_xxs's and iq3_s's per-lane MmaFrag (kernels_src/mmvq/mma_frag.cuh) and the
// split tags fmt_<iq1_m | iq2_xs | iq2_s>_k16pair (two m16n8k16 mmas a chunk, one per 16-value scale, with the
// lane pair: kernels_src/mmvq/mma_frag_split.cuh, whose header holds the arithmetic contract). Here: the split
// formats' per-lane tags fmt_<format>_k16, the same SplitFrag with each lane computing both groups' selectors
// (GridPairFrag<F, false>: no shuffle), so that one run separates the exchange from the rest.
// Host-compilable, like mma_frag.cuh.
#pragma once
#include "mmvq/mma_frag_split.cuh"  // MMA_SPLIT_TAG, MMA_SPLIT_FORMATS, SplitFrag

namespace siq {

#define MMA5_LANE_TAG(name) MMA_SPLIT_TAG(name, fmt_##name##_k16, false)
MMA_SPLIT_FORMATS(MMA5_LANE_TAG)
#undef MMA5_LANE_TAG

}  // namespace siq
