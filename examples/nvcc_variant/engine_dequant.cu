// engine_dequant.cu: a dequant variant written as an inference engine writes its kernels, built by nvcc
// with no change for strata-bench: C++ standard headers, host code (the engine's launcher and its error
// check), the engine's own types (its quant type enum, a by-value row view) and a kernel template on the
// engine's enum. variants.toml declares it against the dequant launch ABI (docs/ABI.md, "dequant").
//
// ARITHMETIC CONTRACT: every chunk is decoded by the project's dequant/dequant.cuh (deq::Deq<F>::chunk),
// the decoder of the built-in dequant_f32, so every value must equal the baseline's, and gguf-py's, bit
// for bit. Only the thread mapping changes: a 2-D grid, x over a row's chunks (ENG_WARPS warps of 32
// per block), y over rows.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "dequant/dequant.cuh"

#ifndef ENG_WARPS
#define ENG_WARPS 4
#endif

namespace eng {

// The engine's quant types, numbered as the engine numbers them (not the harness's format names).
enum type : int {
    Q8_0 = 8, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, IQ1_M = 29, Q2_0 = 100,
};

// A row view, passed to the kernel by value (24 bytes: a pointer, a long long and two ints).
struct rows {
    const uint8_t* data;
    long long stride;  // bytes from one row to the next
    int nrows;
    int nchunks;  // 32-value chunks per row
};

template <type T> struct decoder;
template <> struct decoder<Q8_0> { using F = siq::fmt_q8_0; };
template <> struct decoder<IQ2_XXS> { using F = siq::fmt_iq2_xxs; };
template <> struct decoder<IQ2_XS> { using F = siq::fmt_iq2_xs; };
template <> struct decoder<IQ3_XXS> { using F = siq::fmt_iq3_xxs; };
template <> struct decoder<IQ1_S> { using F = siq::fmt_iq1_s; };
template <> struct decoder<IQ4_NL> { using F = siq::fmt_iq4_nl; };
template <> struct decoder<IQ3_S> { using F = siq::fmt_iq3_s; };
template <> struct decoder<IQ2_S> { using F = siq::fmt_iq2_s; };
template <> struct decoder<IQ4_XS> { using F = siq::fmt_iq4_xs; };
template <> struct decoder<IQ1_M> { using F = siq::fmt_iq1_m; };
template <> struct decoder<Q2_0> { using F = siq::fmt_q2_0; };

template <type T>
__global__ void __launch_bounds__(32 * ENG_WARPS) dequantize_rows(const rows w, float* __restrict__ y) {
    using F = typename decoder<T>::F;
    const int c = (blockIdx.x * ENG_WARPS + threadIdx.y) * 32 + threadIdx.x;
    const long long row = blockIdx.y;
    if (c >= w.nchunks || row >= w.nrows) return;
    float v[32];
    deq::Deq<F>::chunk(w.data + row * w.stride + (c / F::CHUNKS) * F::BYTES, c % F::CHUNKS, v);
    float4* out = reinterpret_cast<float4*>(y + (row * w.nchunks + c) * 32);
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
}

template <type T>
static cudaError_t launch(const rows& w, float* y, cudaStream_t stream) {
    const dim3 block(32, ENG_WARPS);
    const dim3 grid((w.nchunks + 32 * ENG_WARPS - 1) / (32 * ENG_WARPS), w.nrows);
    dequantize_rows<T><<<grid, block, 0, stream>>>(w, y);
    return cudaGetLastError();
}

}  // namespace eng

// The engine's entry point: one launch per call, by the engine's type (this is also what instantiates
// every kernel: nvcc keeps the instances its host code launches).
extern "C" int eng_dequantize(int t, const uint8_t* data, long long stride, int nrows, int nchunks, float* y,
                              cudaStream_t stream) {
    const eng::rows w{data, stride, nrows, nchunks};
    cudaError_t err = cudaErrorInvalidValue;
    switch (t) {
        case eng::Q8_0: err = eng::launch<eng::Q8_0>(w, y, stream); break;
        case eng::IQ2_XXS: err = eng::launch<eng::IQ2_XXS>(w, y, stream); break;
        case eng::IQ2_XS: err = eng::launch<eng::IQ2_XS>(w, y, stream); break;
        case eng::IQ3_XXS: err = eng::launch<eng::IQ3_XXS>(w, y, stream); break;
        case eng::IQ1_S: err = eng::launch<eng::IQ1_S>(w, y, stream); break;
        case eng::IQ4_NL: err = eng::launch<eng::IQ4_NL>(w, y, stream); break;
        case eng::IQ3_S: err = eng::launch<eng::IQ3_S>(w, y, stream); break;
        case eng::IQ2_S: err = eng::launch<eng::IQ2_S>(w, y, stream); break;
        case eng::IQ4_XS: err = eng::launch<eng::IQ4_XS>(w, y, stream); break;
        case eng::IQ1_M: err = eng::launch<eng::IQ1_M>(w, y, stream); break;
        case eng::Q2_0: err = eng::launch<eng::Q2_0>(w, y, stream); break;
        default: break;
    }
    if (err != cudaSuccess) {
        std::fprintf(stderr, "eng_dequantize(type %d): %s\n", t, cudaGetErrorString(err));
        return -1;
    }
    return 0;
}
