// EXPECT kernel=checked_gather site=launch_checked_gather error=CUDA_ERROR_ASSERT confidence=exact reporter=cuCtxSynchronize
//
// device_assert.cu: a device-side assert (the C++ twin of PyTorch's
// "device-side assert triggered").
//
// Timeline (legacy default stream):
//   launch_prepare()         iota                   -> good
//   launch_checked_gather()  checked_gather         -> CULPRIT: one index equals n,
//                                                      assert(j < n) fails -> 710
//   launch_postprocess()     square                 -> good, queued after the
//                                                      culprit, never runs
//   cudaDeviceSynchronize()                         -> REPORTS cudaErrorAssert
//
// The device prints "device_assert.cu:NN: void checked_gather(...): block:
// [0,0,0], thread: [37,0,0] Assertion `j < n` failed." on stderr. assert() is
// active because nvcc does not define NDEBUG. cudaDeviceSynchronize is the
// driver's cuCtxSynchronize_v2 (checked with cuda-gdb, CUDA 13.0).
//
// Expected: "sample-error: cudaErrorAssert at cudaDeviceSynchronize() ...",
// exit 1.
#include <cassert>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void iota(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = float(i);
}

__global__ void checked_gather(const float* src, const int* idx, float* dst, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) {
        int j = idx[i];
        assert(j < n);
        dst[i] = src[j];
    }
}

__global__ void square(float* x, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) x[i] = x[i] * x[i];
}

__attribute__((noinline)) cudaError_t launch_prepare(float* src, int n) {
    iota<<<(n + 127) / 128, 128>>>(src, n);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_checked_gather(const float* src, const int* idx,
                                                            float* dst, int n, int m) {
    checked_gather<<<(m + 127) / 128, 128>>>(src, idx, dst, n, m);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_postprocess(float* dst, int m) {
    square<<<(m + 127) / 128, 128>>>(dst, m);
    return cudaGetLastError();
}

int main() {
    const int n = 256, m = 64;
    int host_idx[m];
    for (int i = 0; i < m; ++i) host_idx[i] = (i * 7) % n;
    host_idx[37] = n;  // BUG: off by one, one past the end of src

    float *src = nullptr, *dst = nullptr;
    int* idx = nullptr;
    CHECK(cudaMalloc(&src, n * sizeof(float)));
    CHECK(cudaMalloc(&dst, m * sizeof(float)));
    CHECK(cudaMalloc(&idx, m * sizeof(int)));
    CHECK(cudaMemcpy(idx, host_idx, sizeof(host_idx), cudaMemcpyHostToDevice));

    CHECK(launch_prepare(src, n));
    CHECK(launch_checked_gather(src, idx, dst, n, m));
    CHECK(launch_postprocess(dst, m));
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
