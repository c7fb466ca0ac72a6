// iq2_xxs_as.h: for the host build of tests/test_mmvq_lanepair.py only (tests/iq_host, after
// mma_frag_iq2xxs.cuh): dot_mma's "iq2_xxs" (MMA_EMUL_EXTRA_FORMATS) runs the fragment decoder of the tag
// MMA_EMUL_IQ2_XXS (fmt_iq2_xxs_pair or fmt_iq2_xxs_lane), so the built-in emulation checks it against
// iq2_xxs's full decode and runs the schedule with it.
#pragma once
namespace siq {
template <>
struct MmaFrag<fmt_iq2_xxs> : MmaFrag<MMA_EMUL_IQ2_XXS> {};
}  // namespace siq
