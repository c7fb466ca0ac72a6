// my_dequant.cu: a user's variant of the built-in dequant_f32, one warp per row (lane l writes the
// row's chunks l, l+32, ...) instead of one thread per chunk over the whole matrix.
//
// ARITHMETIC CONTRACT: the values come from the same decoder (dequant/dequant.cuh), one chunk at a time,
// so every element must equal the built-in kernel's, and gguf-py's, bit for bit. Only the thread
// mapping and the store width change.
#include "dequant/dequant.cuh"

using namespace siq;

template <class F>
__global__ void my_dequant_rows(const uint8_t* __restrict__ W, long long row_stride, int rows, int nchunks,
                                float* __restrict__ Y) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    for (int c = threadIdx.x % 32; c < nchunks; c += 32) {
        float v[32];
        deq::Deq<F>::chunk(W + row * row_stride + (c / F::CHUNKS) * F::BYTES, c % F::CHUNKS, v);
        float* out = Y + ((long long)row * nchunks + c) * 32;
#pragma unroll
        for (int i = 0; i < 32; ++i) out[i] = v[i];
    }
}
