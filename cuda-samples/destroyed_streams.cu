// EXPECT kernel=late_scatter site=launch_after_the_streams error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuStreamSynchronize
//
// destroyed_streams.cu: work on streams the program destroyed must not cost a later fault its
// exact verdict.
//
//   80 non-blocking streams, each:  10 small kernels, then cudaStreamDestroy right away (the
//                                   driver releases the stream once its work is done)
//   usleep(50 ms)                   all of that work completes; nothing synchronizes
//   launch_after_the_streams()      late_scatter on stream B -> CULPRIT: writes through a bogus
//                                   (near-null) pointer, 700
//   cudaStreamSynchronize(B)        -> REPORTS cudaErrorIllegalAddress
//
// Why confidence=exact: with sparse progress markers a stream's last ops usually carry no
// marker, and a destroyed stream gets no later op that would: cudablame writes one behind a
// recorded stream's last op just before the real cuStreamDestroy (the handle is still valid
// then), so the 800 kernels are proven complete, and B's only op is the culprit. Before that
// marker, the 80 streams' unmarked tails stayed "possibly unfinished" (64 kept, the rest only
// counted) and the verdict could be no better than likely.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaStreamSynchronize(b) ...", exit 1.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <unistd.h>

#include "check.h"

__global__ void bump(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}

__global__ void late_scatter(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}

__attribute__((noinline)) cudaError_t launch_on_short_lived_streams(float* x, int n) {
    for (int s = 0; s < 80; s++) {
        cudaStream_t t;
        cudaError_t e = cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
        if (e != cudaSuccess) return e;
        for (int k = 0; k < 10; k++) bump<<<(n + 255) / 256, 256, 0, t>>>(x, n);
        e = cudaStreamDestroy(t);
        if (e != cudaSuccess) return e;
    }
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_after_the_streams(cudaStream_t b, int n) {
    // BUG: output buffer pointer never set up.
    float* out = reinterpret_cast<float*>(uintptr_t(0x10));
    late_scatter<<<(n + 255) / 256, 256, 0, b>>>(out, n);
    return cudaGetLastError();
}

int main() {
    const int n = 4096;
    float* x = nullptr;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMemset(x, 0, n * sizeof(float)));
    cudaStream_t b;
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(launch_on_short_lived_streams(x, n));
    usleep(50000);
    CHECK(launch_after_the_streams(b, n));
    CHECK(cudaStreamSynchronize(b));
    printf("unexpected: no error\n");
    return 0;
}
