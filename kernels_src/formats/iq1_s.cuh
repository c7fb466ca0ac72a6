// formats/iq1_s.cuh: the iq1_s block layout, defined once for every decoder of kernels_src.
// IQ1_S: low 8 bits of 11-bit grid indexes, then per 32 values a u16: 3 high bits per group,
// scale in bits 12-14, delta sign in bit 15.
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq1_s {
    enum : int {
        QK = STRATA_IQ1_S_QK,  // values per block
        BYTES = STRATA_IQ1_S_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 32 bytes: low 8 bits of the grid indexes
        QH = 34,  // 16 bytes: u16 per 32 values
    };
};
static_assert(iq1_s::QH + 16 == iq1_s::BYTES, "iq1_s: fields do not fill the block");

}  // namespace layout
