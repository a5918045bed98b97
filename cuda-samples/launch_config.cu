// EXPECT kernel=too_big_block site=launch_too_big error=CUDA_ERROR_INVALID_VALUE confidence=exact reporter=cuLaunchKernel
// EXPECT-OPTIONAL
//
// launch_config.cu: a launch with 2048 threads per block (the limit is 1024).
//
// This is a *synchronous, non-sticky* error: the launch call itself fails and
// the context stays usable. The culprit is trivially exact: it is the very
// launch that returned the error, launched from launch_too_big.
//
// Observed on the H200 (CUDA 13.0, driver 580, static and shared cudart, under
// cuda-gdb): cudart does NOT pre-validate the block size; it calls
// cuLaunchKernel, which returns CUDA_ERROR_INVALID_VALUE ("block dimensions of
// (2048,1,1) exceed (1024,1024,64)"), and cudart hands the program
// cudaErrorInvalidValue (not cudaErrorInvalidConfiguration, as older runtimes
// did).
//
// Why EXPECT-OPTIONAL anyway: other cudart versions may validate the block
// size themselves and return cudaErrorInvalidConfiguration without ever
// calling the driver. Then the shim (which sits on the driver API) never sees
// an error and writes no report. gpu-check.sh counts a missing report here as
// "skipped", not "failed"; if a report IS written it is checked like any other
// case, and the exit-code transparency check applies either way.
//
// To show the context is still fine afterwards, main() runs a good kernel and
// a sync after the failed launch, and then exits 1 because of the launch
// error.
//
// Expected: "sample-error: cudaErrorInvalidValue at launch_err: invalid
// argument", exit 1.
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void warm(float* out) { out[threadIdx.x] = 1.0f; }

__global__ void too_big_block(float* out) { out[threadIdx.x] = 2.0f; }

__attribute__((noinline)) cudaError_t launch_warm(float* out) {
    warm<<<1, 256>>>(out);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_too_big(float* out) {
    too_big_block<<<1, 2048>>>(out);  // BUG: > 1024 threads per block
    return cudaGetLastError();
}

int main() {
    float* out = nullptr;
    CHECK(cudaMalloc(&out, 2048 * sizeof(float)));
    CHECK(launch_warm(out));
    CHECK(cudaDeviceSynchronize());

    cudaError_t launch_err = launch_too_big(out);

    // Non-sticky: the context keeps working.
    CHECK(launch_warm(out));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_err);
    printf("unexpected: no error\n");
    return 0;
}
