// formats/q2_0.cuh: the q2_0 block layout, defined once for every decoder of kernels_src.
// Q2_0 (this project's 2-bit format): fp16 d, then 16 code bytes; element e has code
// (qs[e % 16] >> 2*(e / 16)) & 3 and value d * (2q - 3).
// Values and bytes per block come from generated/strata_constants.cuh (Python reads the same numbers
// from strata_bench/kernels/constants.py). Enumerators, not variables: a layout adds no symbol to a cubin.
#pragma once
#include "generated/strata_constants.cuh"

namespace layout {

struct q2_0 {
    enum : int {
        QK = STRATA_Q2_0_QK,  // values per block
        BYTES = STRATA_Q2_0_BYTES,  // bytes per block
        D = 0,  // 2 bytes: fp16 scale
        QS = 2,  // 16 bytes: 2-bit codes, four per byte
    };
};
static_assert(q2_0::QS + 16 == q2_0::BYTES, "q2_0: fields do not fill the block");

}  // namespace layout
