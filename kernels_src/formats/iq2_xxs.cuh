// formats/iq2_xxs.cuh: the iq2_xxs block layout, defined once for every decoder of kernels_src.
// IQ2_XXS: per 32 values 8 bytes: four grid indexes (u8), then a u32 of four 7-bit sign indexes with
// the 4-bit scale in bits 28-31.
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq2_xxs {
    enum : int {
        QK = STRATA_IQ2_XXS_QK,  // values per block
        BYTES = STRATA_IQ2_XXS_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 64 bytes: 8 bytes per 32 values
    };
};
static_assert(iq2_xxs::QS + 64 == iq2_xxs::BYTES, "iq2_xxs: fields do not fill the block");

}  // namespace layout
