// EXPECT kernel=checked_index site=launch_checked_index error=CUDA_ERROR_ASSERT confidence=exact reporter=cuCtxSynchronize assert="Assertion `j < n` failed" stdout=same
//
// multi_stream_assert.cu: three streams busy, a device-side assert on one.
//
// Timeline (three non-blocking streams, nothing synchronized in between):
//   warm_up()                 spin (0 ns) on A, B; checked_index on C with
//                             good indices; cudaDeviceSynchronize -> good
//   launch_checked_index(C)   checked_index: spins ~5 ms, then one thread
//                             sees j == n: assert(j < n) fails -> CULPRIT, 710
//   launch_spins(A, B)        spin (300 ms each, 2 per stream), launched
//                             AFTER the culprit: "most recently launched"
//                             would blame a spin
//   cudaDeviceSynchronize()                                -> REPORTS 710
//
// When the assert fires the context dies and all three streams had an
// unfinished first op (A's spin, B's spin, C's checked_index): the progress
// markers alone give three candidates (likely). The driver prints
// "multi_stream_assert.cu:NN: void checked_index(...): block: [0,0,0],
// thread: [37,0,0] Assertion `j < n` failed." on stdout from inside
// libcuda.so.1; cudablame captures that line (patching only libcuda's own
// vfprintf slot) and only C's candidate runs checked_index: exact. stdout=same
// checks that the program's stdout (the assert line included) is byte for
// byte the same with and without cudablame.
//
// Expected: "sample-error: cudaErrorAssert at cudaDeviceSynchronize() ...",
// exit 1.
#include <cassert>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

// A long-running healthy kernel (one thread).
__global__ void spin(long long ns) {
    const unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < ns) __nanosleep(1000);
}

// Busy for delay_ns, then checks each index: the assert fires for idx == n.
__global__ void checked_index(const int* idx, float* out, int n, int m, long long delay_ns) {
    const unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < delay_ns) __nanosleep(1000);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) {
        int j = idx[i];
        assert(j < n);
        out[i] = float(j);
    }
}

__attribute__((noinline)) cudaError_t warm_up(cudaStream_t a, cudaStream_t b, cudaStream_t c,
                                              const int* good, float* out, int n, int m) {
    spin<<<1, 1, 0, a>>>(0);
    spin<<<1, 1, 0, b>>>(0);
    checked_index<<<1, 64, 0, c>>>(good, out, n, m, 0);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_checked_index(cudaStream_t c, const int* idx,
                                                           float* out, int n, int m) {
    checked_index<<<1, 64, 0, c>>>(idx, out, n, m, 5LL * 1000 * 1000);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_spins(cudaStream_t a, cudaStream_t b) {
    for (int k = 0; k < 2; ++k) {
        spin<<<1, 1, 0, a>>>(300LL * 1000 * 1000);
        spin<<<1, 1, 0, b>>>(300LL * 1000 * 1000);
    }
    return cudaGetLastError();
}

int main() {
    const int n = 256, m = 64;
    int host_good[m], host_bad[m];
    for (int i = 0; i < m; ++i) host_good[i] = host_bad[i] = (i * 7) % n;
    host_bad[37] = n;  // BUG: one past the end

    int *good = nullptr, *bad = nullptr;
    float* out = nullptr;
    cudaStream_t a, b, c;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&good, sizeof(host_good)));
    CHECK(cudaMalloc(&bad, sizeof(host_bad)));
    CHECK(cudaMalloc(&out, m * sizeof(float)));
    CHECK(cudaMemcpy(good, host_good, sizeof(host_good), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(bad, host_bad, sizeof(host_bad), cudaMemcpyHostToDevice));
    CHECK(warm_up(a, b, c, good, out, n, m));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_checked_index(c, bad, out, n, m));
    CHECK(launch_spins(a, b));
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
