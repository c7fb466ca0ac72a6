// A deliberately faulting kernel for the fault-handling test: variant 1 writes through a wild pointer.
// Arithmetic contract: y[i] = 2 * x[i] exactly (a doubling is exact in fp32).
extern "C" __global__ void double_it(const float* x, float* y, int n, int fault) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float* target = fault ? (float*)(0x10ull + 4ull * i) : y;  // illegal address when fault != 0
    target[fault ? 0 : i] = 2.0f * x[i];
}
