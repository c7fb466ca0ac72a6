// mmvq_onecol1m.cu: the product's one-column kernel, mmvq_onecol<D, R, MINB, U> (kernels_src/mmvq/mmvq_onecol.cu:
// its ARITHMETIC CONTRACT, schedule and activation staging, included as they are), run with iq1_m's selector-table
// decoder (onecol1m_dec.cuh: onecol::Iq1mSel<WIDE>). experiments/mmvq_onecol1m/README.md has the design.
#include "onecol1m_dec.cuh"
#include "mmvq/mmvq_onecol.cu"
