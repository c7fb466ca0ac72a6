// grouped's baseline as one translation unit: the q8_1 quantizer and the grouped kernels.
#include "q8_1/q8_1.cu"
#include "grouped/grouped.cu"
