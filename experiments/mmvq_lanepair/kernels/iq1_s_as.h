// iq1_s_as.h: for the host build of tests/test_mmvq_lanepair.py only (tests/iq_host, after mma_frag_pair.cuh):
// dot_mma's "iq1_s" runs the fragment decoder of the tag LANEPAIR_HOST_TAG (fmt_iq1_s_pair or fmt_iq1_s_lane),
// so the built-in emulation checks it against iq1_s's full decode and runs the schedule with it.
#pragma once
namespace siq {
template <>
struct MmaFrag<fmt_iq1_s> : MmaFrag<LANEPAIR_HOST_TAG> {};
}  // namespace siq
