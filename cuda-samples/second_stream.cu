// EXPECT kernel=side_scatter site=launch_on_side_stream error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuStreamSynchronize
//
// second_stream.cu: the culprit runs on one stream, the error is reported by
// a synchronize of a *different* stream.
//
// Two non-blocking streams A and B (cudaStreamNonBlocking, so neither
// synchronises implicitly with the legacy default stream):
//   launch_on_main_stream()   relu, axpy, relu on A  -> good
//   cudaStreamSynchronize(A)                         -> succeeds; A is idle now
//   launch_on_side_stream()   side_scatter on B      -> CULPRIT: writes through a
//                                                       bogus (near-null) pointer, 700
//   cudaEventRecord(ev, B); cudaStreamWaitEvent(A, ev)
//                                                    -> A now waits for B's work
//   cudaStreamSynchronize(A)                         -> REPORTS cudaErrorIllegalAddress
//
// Why confidence=exact: A's kernels are all known complete (we synchronised A
// before the culprit was launched), and A received no further kernel, only an
// event wait. So at the time of the fault exactly one kernel was in flight in
// the whole process: side_scatter on B. The shim must blame it even though the
// failing call names stream A. (Without the first cudaStreamSynchronize(A),
// A's kernels could still be running concurrently with B's, and a shim could
// honestly only say "likely".)
//
// The event wait makes the synchronize of A really depend on the faulting
// stream, so the error is deterministically observed there (driver entry
// point cuStreamSynchronize) and not at some unrelated later call. See
// oob_write.cu for why the bad pointer is 0x10.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaStreamSynchronize(a)
// ...", exit 1.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void relu(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] > 0.f ? x[i] : 0.f;
}

__global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}

__global__ void side_scatter(float* out, const int* where, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[where ? where[i] : i] = 1.0f;
}

__attribute__((noinline)) cudaError_t launch_on_main_stream(cudaStream_t a, float* x, float* y,
                                                            int n) {
    int blocks = (n + 255) / 256;
    relu<<<blocks, 256, 0, a>>>(x, n);
    axpy<<<blocks, 256, 0, a>>>(2.0f, x, y, n);
    relu<<<blocks, 256, 0, a>>>(y, n);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_on_side_stream(cudaStream_t b, int n) {
    // BUG: output buffer pointer never set up.
    float* out = reinterpret_cast<float*>(uintptr_t(0x10));
    side_scatter<<<(n + 255) / 256, 256, 0, b>>>(out, nullptr, n);
    return cudaGetLastError();
}

int main() {
    const int n = 4096;
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));

    float *x = nullptr, *y = nullptr;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&y, n * sizeof(float)));
    CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), a));
    CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), a));

    CHECK(launch_on_main_stream(a, x, y, n));
    CHECK(cudaStreamSynchronize(a));  // stream A is idle from here on

    CHECK(launch_on_side_stream(b, n));
    CHECK(cudaEventRecord(ev, b));
    CHECK(cudaStreamWaitEvent(a, ev, 0));
    CHECK(cudaStreamSynchronize(a));
    printf("unexpected: no error\n");
    return 0;
}
