// formats/q8_0.cuh: the q8_0 block layout, defined once for every decoder of kernels_src.
// Q8_0: fp16 d, then 32 int8 codes; value = d * q.
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct q8_0 {
    enum : int {
        QK = STRATA_Q8_0_QK,  // values per block
        BYTES = STRATA_Q8_0_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 32 bytes: int8 codes
    };
};
static_assert(q8_0::QS + 32 == q8_0::BYTES, "q8_0: fields do not fill the block");

}  // namespace layout
