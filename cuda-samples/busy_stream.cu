// EXPECT kernel=side_fault site=launch_on_side_stream error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=likely reporter=cuStreamSynchronize
//
// busy_stream.cu: the culprit runs on a side stream while another stream is
// busy with many long kernels; the error is reported by a synchronize of the
// busy stream.
//
// Timeline (two non-blocking streams):
//   launch_busy_work(A)        20 x spin (2 ms each, 1 block)  -> good, ~40 ms of
//                                                                 queued work
//   launch_on_side_stream(B)   side_fault                      -> CULPRIT, launched
//                                                                 last: writes
//                                                                 through 0x10 at
//                                                                 once -> 700
//   cudaStreamSynchronize(A)                                   -> REPORTS
//                                                                 (cuStreamSynchronize)
//
// Why confidence=likely, not exact: when the context dies, stream A is in the
// middle of its spin kernels (the fault comes within microseconds of B's
// launch, ~40 ms before A would finish), so two streams have a first
// unfinished op: one of A's spins and B's side_fault. Progress markers cannot
// say which of the two faulted; cudablame ranks the most recently launched
// one first (a fault kills the context microseconds after the faulting
// kernel starts, while a busy stream's first unfinished op was queued long
// before), which is side_fault: culprit, likely; A's spin is the first
// suspect. The spins are 2 ms (not 1) so that even a slow fault teardown
// leaves A unfinished. The spin kernels use one block each, so B's kernel
// runs concurrently with them.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaStreamSynchronize(a)
// ...", exit 1.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#define CHECK(call)                                                              \
    do {                                                                         \
        cudaError_t e_ = (call);                                                 \
        if (e_ != cudaSuccess) {                                                 \
            fprintf(stderr, "sample-error: %s at %s: %s\n", cudaGetErrorName(e_), \
                    #call, cudaGetErrorString(e_));                              \
            return 1;                                                            \
        }                                                                        \
    } while (0)

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Stands for a long-running kernel: busy for ns nanoseconds.
__global__ void spin(long long ns, int* ticks) {
    unsigned long long t0 = global_ns();
    int n = 0;
    while ((long long)(global_ns() - t0) < ns) {
        __nanosleep(500);
        ++n;
    }
    if (threadIdx.x == 0) atomicAdd(ticks, n);
}

__global__ void side_fault(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = float(i);
}

__attribute__((noinline)) cudaError_t launch_busy_work(cudaStream_t a, int* ticks) {
    for (int k = 0; k < 20; ++k) spin<<<1, 32, 0, a>>>(2LL * 1000 * 1000, ticks);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_on_side_stream(cudaStream_t b, int n) {
    // BUG: the side buffer was never allocated.
    float* out = reinterpret_cast<float*>(uintptr_t(0x10));
    side_fault<<<(n + 255) / 256, 256, 0, b>>>(out, n);
    return cudaGetLastError();
}

int main() {
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    int* ticks = nullptr;
    CHECK(cudaMalloc(&ticks, sizeof(int)));
    CHECK(cudaMemset(ticks, 0, sizeof(int)));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_busy_work(a, ticks));
    CHECK(launch_on_side_stream(b, 1024));
    CHECK(cudaStreamSynchronize(a));
    printf("unexpected: no error\n");
    return 0;
}
