// formats/iq3_xxs.cuh: the iq3_xxs block layout, defined once for every decoder of kernels_src.
// IQ3_XXS: 8-bit grid indexes (4 values each), then per 32 values a u32 of four 7-bit sign indexes
// with the 4-bit scale in bits 28-31.
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq3_xxs {
    enum : int {
        QK = STRATA_IQ3_XXS_QK,  // values per block
        BYTES = STRATA_IQ3_XXS_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 64 bytes: grid indexes
        SCALES_SIGNS = 66,  // 32 bytes: u32 per 32 values
    };
};
static_assert(iq3_xxs::SCALES_SIGNS + 32 == iq3_xxs::BYTES, "iq3_xxs: fields do not fill the block");

}  // namespace layout
