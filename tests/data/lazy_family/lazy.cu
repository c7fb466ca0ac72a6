// The timed-output test's kernels: y[i] = 2 * x[i] exactly (a doubling is exact in fp32).
// double_all does its work on every launch. double_lazy does it only on its first `honest` launches in
// this process: each block takes a ticket from a device counter that is never reset, and a block whose
// ticket belongs to launch `honest` or later returns at once. Launches on one stream run in order, so
// launch k's blocks draw tickets k*gridDim.x ... (k+1)*gridDim.x - 1. It passes a check of one launch;
// its timed replays write nothing.
__device__ unsigned int lazy_tickets;

extern "C" __global__ void double_all(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

extern "C" __global__ void double_lazy(const float* x, float* y, int n, unsigned int honest) {
    __shared__ unsigned int ticket;
    if (threadIdx.x == 0) ticket = atomicAdd(&lazy_tickets, 1u);
    __syncthreads();
    if (ticket / gridDim.x >= honest) return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
