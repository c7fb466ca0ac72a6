// formats/iq2_xs.cuh: the iq2_xs block layout, defined once for every decoder of kernels_src.
// IQ2_XS: u16 entries (9-bit grid index, 7-bit sign index), then two 4-bit scales per 32 values.
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq2_xs {
    enum : int {
        QK = STRATA_IQ2_XS_QK,  // values per block
        BYTES = STRATA_IQ2_XS_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 64 bytes: 32 u16 entries
        SCALES = 66,  // 8 bytes: two 4-bit scales per 32 values
    };
};
static_assert(iq2_xs::SCALES + 8 == iq2_xs::BYTES, "iq2_xs: fields do not fill the block");

}  // namespace layout
