// mmvq_onecol1m.cu: the product's one-column kernel, mmvq_onecol<D, R, MINB, U> (kernels_src/mmvq/mmvq_onecol.cu:
// its ARITHMETIC CONTRACT, schedule and activation staging), with iq1_m's selector-table decoder
// (kernels_src/mmvq/onecol_dec_iq1m.cuh: onecol::Iq1mSel<WIDE>; the product runs WIDE = false, this experiment both).
// experiments/mmvq_onecol1m/README.md has the design.
#include "mmvq/mmvq_onecol.cu"
