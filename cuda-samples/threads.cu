// EXPECT kernel=worker_scatter site=launch_from_worker error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuCtxSynchronize
// BUILD-FLAGS: -lpthread
//
// threads.cu: the culprit is launched by one host thread, the error surfaces
// in another (a worker/loader thread launches a kernel and returns; the
// main thread synchronizes later).
//
// Timeline (legacy default stream, shared by both threads):
//   main:   launch_prepare()        fill            -> good; cudaDeviceSynchronize
//   worker: launch_from_worker()    worker_scatter  -> CULPRIT: writes through a
//                                                      bogus (0x10) pointer, 700;
//                                                      the worker only checks
//                                                      cudaGetLastError (fine) and
//                                                      exits
//   main:   join(); cudaDeviceSynchronize()         -> REPORTS (cuCtxSynchronize_v2)
//
// The culprit op must carry the *worker's* thread id and stack
// (launch_from_worker, under std::thread's trampoline), while the reporting
// call is on the main thread. One stream with one unfinished op: exact.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaDeviceSynchronize()
// ...", exit 1.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <thread>

#include "check.h"

__global__ void fill(float* x, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

__global__ void worker_scatter(float* out, const float* src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = src[i] * 2.0f;
}

__attribute__((noinline)) cudaError_t launch_prepare(float* x, int n) {
    fill<<<(n + 255) / 256, 256>>>(x, n, 1.0f);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_from_worker(const float* src, int n) {
    // BUG: the worker's output buffer was never allocated.
    float* out = reinterpret_cast<float*>(uintptr_t(0x10));
    worker_scatter<<<(n + 255) / 256, 256>>>(out, src, n);
    return cudaGetLastError();
}

int main() {
    const int n = 4096;
    float* src = nullptr;
    CHECK(cudaMalloc(&src, n * sizeof(float)));
    CHECK(launch_prepare(src, n));
    CHECK(cudaDeviceSynchronize());

    cudaError_t worker_err = cudaSuccess;
    std::thread worker([&] { worker_err = launch_from_worker(src, n); });
    worker.join();
    CHECK(worker_err);  // the launch itself was fine
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
