// params.cu: the kernels of tests/kernels/test_cubin.py's committed cubins (params_sm90.cubin,
// params.fatbin), built by `nvcc -cubin -arch=sm_90 -o params_sm90.cubin params.cu` and
// `nvcc -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -o params.fatbin params.cu`:
// parameters of every kind the TOML launch ABI describes (pointers, scalars, a by-value struct, uint3),
// an engine-style enum template, a static kernel and host code.
#include <cstdint>
#include <cstdio>

namespace eng {
enum qtype { Q_A = 16, Q_B = 20 };
struct fusion { const float* bias; const float* gate; int op; float scale; };
}

template <eng::qtype t, int ncols>
static __global__ void matvec(const void* vx, const float* __restrict__ y, eng::fusion f, float* dst,
                              const uint3 nch, const int rows, long long stride) {
    if (threadIdx.x == 0) dst[blockIdx.x] = y[0] * f.scale + nch.x + ncols + t + stride + rows;
}

__global__ void plain(float* p, char c, short s, double d) { p[0] = c + s + d; }

void launch_all(const void* vx, const float* y, float* dst, cudaStream_t stream) {
    eng::fusion f{nullptr, nullptr, 0, 1.0f};
    matvec<eng::Q_A, 1><<<1, 32, 0, stream>>>(vx, y, f, dst, make_uint3(1, 0, 1), 1, 1);
    matvec<eng::Q_A, 2><<<1, 32, 0, stream>>>(vx, y, f, dst, make_uint3(1, 0, 1), 1, 1);
    matvec<eng::Q_B, 1><<<1, 32, 0, stream>>>(vx, y, f, dst, make_uint3(1, 0, 1), 1, 1);
    plain<<<1, 1, 0, stream>>>(dst, 1, 2, 3.0);
    printf("launched\n");
}
