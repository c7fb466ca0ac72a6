// formats/iq4_xs.cuh: the iq4_xs block layout, defined once for every decoder of kernels_src.
// IQ4_XS: 8 sub-blocks of 32 values with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h).
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq4_xs {
    enum : int {
        QK = STRATA_IQ4_XS_QK,  // values per block
        BYTES = STRATA_IQ4_XS_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        SCALES_H = 2,  // 2 bytes: u16: bits 2i..2i+1 = high bits of scale i
        SCALES_L = 4,  // 4 bytes: nibble i = low bits of scale i
        QS = 8,  // 128 bytes: 4-bit codes, 16 bytes a sub-block
    };
};
static_assert(iq4_xs::QS + 128 == iq4_xs::BYTES, "iq4_xs: fields do not fill the block");

}  // namespace layout
