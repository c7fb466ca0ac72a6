// formats/iq1_m.cuh: the iq1_m block layout, defined once for every decoder of kernels_src.
// IQ1_M: low 8 bits of the grid indexes, a nibble per group (3 high bits, delta sign), 3-bit scales;
// the fp16 d is spread over the top nibbles of the four u16 scale words.
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq1_m {
    enum : int {
        QK = STRATA_IQ1_M_QK,  // values per block
        BYTES = STRATA_IQ1_M_BYTES,  // bytes per block
        QS = 0,  // 32 bytes: low 8 bits of the grid indexes
        QH = 32,  // 16 bytes: a nibble per group of 8
        SCALES = 48,  // 8 bytes: 16 3-bit scales and d's nibbles
    };
};
static_assert(iq1_m::SCALES + 8 == iq1_m::BYTES, "iq1_m: fields do not fill the block");

}  // namespace layout
