// Host stand-in for <cuda_fp16.h> and the CUDA builtins the i-quant headers use, so that
// tests/test_families_dequant.py can compile kernels_src/common/iq_decode.cuh and dequant/dequant.cuh with a C++ compiler and check the
// decoders on the CPU. Not used by any GPU build.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct __half {
    uint16_t bits;
};
inline float __half2float(__half h) {
    _Float16 f;
    memcpy(&f, &h.bits, 2);
    return (float)f;
}
inline __half __float2half_rn(float x) {
    const _Float16 f = (_Float16)x;  // IEEE round to nearest even, as the device's cvt.rn
    __half h;
    memcpy(&h.bits, &f, 2);
    return h;
}
inline __half __ushort_as_half(uint16_t bits) { return __half{bits}; }
// Warp shuffles only have to compile here (the host tests never call the warp helpers).
inline float __shfl_xor_sync(unsigned, float v, int) { return v; }
inline int __shfl_xor_sync(unsigned, int v, int) { return v; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
struct uint2 {
    unsigned x, y;
};
struct uint4 {
    unsigned x, y, z, w;
};
template <class T>
inline T __ldg(const T* p) { return *p; }
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
    if (shift >= 32u) return hi;
    return shift ? (lo >> shift) | (hi << (32u - shift)) : lo;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    shift &= 31u;
    return shift ? (lo >> shift) | (hi << (32u - shift)) : lo;
}
inline float __int_as_float(int v) {
    float f;
    memcpy(&f, &v, sizeof f);
    return f;
}
inline int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; ++i) c += (int)(int8_t)(a >> (8 * i)) * (int)(int8_t)(b >> (8 * i));
    return c;
}
struct HostDim3 {
    unsigned x, y, z;
};
inline HostDim3 threadIdx{0, 0, 0}, blockDim{1, 1, 1}, blockIdx{0, 0, 0}, gridDim{1, 1, 1};
