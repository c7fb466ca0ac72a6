// formats/iq2_s.cuh: the iq2_s block layout, defined once for every decoder of kernels_src.
// IQ2_S: low 8 bits of 32 grid indexes, 32 sign bytes, bits 8-9 of the indexes, 4-bit scales.
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq2_s {
    enum : int {
        QK = STRATA_IQ2_S_QK,  // values per block
        BYTES = STRATA_IQ2_S_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 32 bytes: low 8 bits of each group's grid index
        SIGNS = 34,  // 32 bytes: one sign byte per group of 8
        QH = 66,  // 8 bytes: bits 8-9 of the indexes, 2 bits per group
        SCALES = 74,  // 8 bytes: two 4-bit scales per 32 values
    };
};
static_assert(iq2_s::SCALES + 8 == iq2_s::BYTES, "iq2_s: fields do not fill the block");

}  // namespace layout
