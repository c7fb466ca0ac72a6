// formats/iq4_nl.cuh: the iq4_nl block layout, defined once for every decoder of kernels_src.
// IQ4_NL: fp16 d, then 16 bytes of 4-bit kvalue indexes (low nibbles: values 0-15, high: 16-31).
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq4_nl {
    enum : int {
        QK = STRATA_IQ4_NL_QK,  // values per block
        BYTES = STRATA_IQ4_NL_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 16 bytes: 4-bit codes
    };
};
static_assert(iq4_nl::QS + 16 == iq4_nl::BYTES, "iq4_nl: fields do not fill the block");

}  // namespace layout
