// EXPECT kernel=ptds_scatter site=launch_on_per_thread_stream error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuStreamSynchronize
// BUILD-FLAGS: --default-stream=per-thread
//
// ptds.cu: the culprit runs on the *per-thread* default stream: the program
// is built with --default-stream per-thread (BUILD-FLAGS), so <<<>>> without
// a stream and cudaStreamPerThread mean this host thread's own default
// stream, and cudart calls the driver's _ptsz/_ptds entry points (or passes
// CU_STREAM_PER_THREAD). The other samples use the legacy default stream.
//
// Timeline (main thread's per-thread default stream):
//   launch_prepare()                 scale         -> good; stream sync proves it done
//   launch_on_per_thread_stream()    ptds_scatter  -> CULPRIT: bogus (0x10)
//                                                     pointer, 700
//   cudaStreamSynchronize(cudaStreamPerThread)     -> REPORTS (cuStreamSynchronize,
//                                                     or its _ptsz variant)
//
// The culprit's stream must come out as the per-thread stream of the main
// thread (per-thread(TID) in the report); it is the only stream with work:
// exact.
//
// Expected: "sample-error: cudaErrorIllegalAddress at
// cudaStreamSynchronize(cudaStreamPerThread) ...", exit 1.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void scale(float* x, int n, float f) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= f;
}

__global__ void ptds_scatter(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i];
}

__attribute__((noinline)) cudaError_t launch_prepare(float* x, int n) {
    scale<<<(n + 255) / 256, 256>>>(x, n, 2.0f);  // per-thread default stream
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_on_per_thread_stream(const float* x, int n) {
    // BUG: the output buffer was never allocated.
    float* out = reinterpret_cast<float*>(uintptr_t(0x10));
    ptds_scatter<<<(n + 255) / 256, 256>>>(out, x, n);  // per-thread default stream
    return cudaGetLastError();
}

int main() {
    const int n = 4096;
    float* x = nullptr;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), cudaStreamPerThread));
    CHECK(launch_prepare(x, n));
    CHECK(cudaStreamSynchronize(cudaStreamPerThread));

    CHECK(launch_on_per_thread_stream(x, n));
    CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    printf("unexpected: no error\n");
    return 0;
}
