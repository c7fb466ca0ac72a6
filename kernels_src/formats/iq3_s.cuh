// formats/iq3_s.cuh: the iq3_s block layout, defined once for every decoder of kernels_src.
// IQ3_S: low 8 bits of the grid indexes, their 9th bits, sign bytes, 4-bit scales (per 32 values).
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct iq3_s {
    enum : int {
        QK = STRATA_IQ3_S_QK,  // values per block
        BYTES = STRATA_IQ3_S_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 64 bytes: low 8 bits of the grid indexes
        QH = 66,  // 8 bytes: 9th bits, one byte per 32 values
        SIGNS = 74,  // 32 bytes: one sign byte per 8 values
        SCALES = 106,  // 4 bytes: 4-bit scales, two per byte
    };
};
static_assert(iq3_s::SCALES + 4 == iq3_s::BYTES, "iq3_s: fields do not fill the block");

}  // namespace layout
