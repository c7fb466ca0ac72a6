// mma_frag_lane.cuh: the controls of experiments/mmvq_lanepair, fmt_iq1_s_lane and fmt_iq2_xxs_lane: the lane-pair
// decoders (kernels_src/mmvq/mma_frag.cuh, GridPairFrag; the product's fmt_iq1_s_pair and fmt_iq2_xxs_pair, first
// measured here) with the partner's selector computed by the lane itself: the same code without the shuffle, each
// lane doing both groups' work, so that one run separates the exchange from the rest of the rewrite. Like every
// MmaFrag they give decode()'s w[t], w[4 + t], dw and ls0 from the same bytes (mma_frag.cuh's contract).
#pragma once
#include "mmvq/mma_frag.cuh"  // Frag, MmaFrag, fmt_iq1_s, fmt_iq2_xxs, GridPairFrag

namespace siq {

struct fmt_iq1_s_lane : fmt_iq1_s {};
struct fmt_iq2_xxs_lane : fmt_iq2_xxs {};

template <>
struct MmaFrag<fmt_iq1_s_lane> : GridPairFrag<fmt_iq1_s, false> {};
template <>
struct MmaFrag<fmt_iq2_xxs_lane> : GridPairFrag<fmt_iq2_xxs, false> {};

}  // namespace siq
