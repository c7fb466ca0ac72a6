// formats/q8_1.cuh: the q8_1 block layout, defined once for every decoder of kernels_src.
// q8_1 (the activation format): fp16 d, fp16 s (sum of the raw inputs), 32 int8 codes.
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct q8_1 {
    enum : int {
        QK = STRATA_Q8_1_QK,  // values per block
        BYTES = STRATA_Q8_1_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        S = 2,  // 2 bytes: fp16 sum
        QS = 4,  // 32 bytes: int8 codes
    };
};
static_assert(q8_1::QS + 32 == q8_1::BYTES, "q8_1: fields do not fill the block");

}  // namespace layout
