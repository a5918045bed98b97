// EXPECT kernel=assert_positive site=launch_assert_positive error=CUDA_ERROR_ASSERT confidence=exact
// BUILD-FLAGS: -lcuda
//
// errstr.cu: the error strings a C++ program prints after a sticky error (issue 23). Also run by
// scripts/gpu-errstr.sh, which reads the lines below.
//
// Timeline (legacy default stream):
//   launch_assert_positive()  assert_positive -> CULPRIT: x[3] = -1, assert(x[i] > 0) -> 710
//   cudaDeviceSynchronize()                   -> REPORTS cudaErrorAssert
//
// Then, on stdout:
//   errstr-launch-line: N                   the line of the culprit's launch in this file
//   errstr-rt: <cudaGetErrorString(err)>    the runtime's string
//   errstr-cu: <cuGetErrorString(710)>      the driver's string (linked with -lcuda)
//   errstr-name: <cudaGetErrorName(err)>    must stay "cudaErrorAssert"
//   errstr-other: <cudaGetErrorString(cudaErrorIllegalAddress)>   must stay plain
// Under cudablame, errstr-cu carries " [cudablame: culprit assert_positive, launched at
// errstr.cu:N (exact); report ...]" in both builds. errstr-rt carries it with the shared
// runtime (the program's reference binds cudablame's export); with the static runtime
// (nvcc's default) cudaGetErrorString is linked into the program, and it carries the note only
// if that code asks the driver's cuGetErrorString (through cuGetProcAddress) for the text:
// gpu-errstr.sh prints which as an INFO line.
//
// Expected: "sample-error: cudaErrorAssert at cudaDeviceSynchronize() ...", exit 1.
#include <cassert>
#include <cstdio>
#include <cuda.h>
#include <cuda_runtime.h>

#include "check.h"

__global__ void assert_positive(const int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(x[i] > 0);
}

static int launch_line = 0;

__attribute__((noinline)) void launch_assert_positive(const int* x, int n) {
    launch_line = __LINE__ + 1;
    assert_positive<<<1, 32>>>(x, n);
    __asm__ volatile("" ::: "memory");  // keeps this frame: no tail call into the launch stub
}

int main() {
    int host[8] = {1, 2, 3, -1, 5, 6, 7, 8};
    int* x = nullptr;
    CHECK(cudaMalloc(&x, sizeof host));
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    launch_assert_positive(x, 8);
    cudaError_t err = cudaDeviceSynchronize();
    const char* cu = "?";
    CUresult crc = cuGetErrorString(CUDA_ERROR_ASSERT, &cu);
    printf("errstr-launch-line: %d\n", launch_line);
    printf("errstr-rt: %s\n", cudaGetErrorString(err));
    printf("errstr-cu: %s (rc %d)\n", cu, (int)crc);
    printf("errstr-name: %s\n", cudaGetErrorName(err));
    printf("errstr-other: %s\n", cudaGetErrorString(cudaErrorIllegalAddress));
    fflush(stdout);
    if (err != cudaSuccess) return sample_error(err, "cudaDeviceSynchronize()");
    return 0;
}
