// scale_rows.cu: a user's own kernel family, y[r][c] = s[r] * x[r][c] in fp32.
// scale_rows_scalar: one thread per element. scale_rows_vec4: one thread per 4 elements (16-byte loads
// and stores; cols % 4 == 0, so a float4 never spans two rows).
//
// ARITHMETIC CONTRACT: every output is one fp32 multiplication of the same two values, correctly
// rounded (no accumulation, nothing to contract into an FMA), so both kernels write the same bits and
// each is within half an ulp of the float64 product.
__global__ void scale_rows_scalar(const float* __restrict__ x, const float* __restrict__ s,
                                  float* __restrict__ y, int rows, int cols) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)rows * cols) return;
    y[i] = s[i / cols] * x[i];
}

__global__ void scale_rows_vec4(const float4* __restrict__ x, const float* __restrict__ s,
                                float4* __restrict__ y, int rows, int cols) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)rows * cols / 4) return;
    const float k = s[i * 4 / cols];
    float4 v = x[i];
    v.x *= k;
    v.y *= k;
    v.z *= k;
    v.w *= k;
    y[i] = v;
}
