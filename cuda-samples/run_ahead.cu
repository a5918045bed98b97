// EXPECT kernel=oob_store site=launch_culprit error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact|oneof among=oob_store
// EXPECT-EVERY confidence=exact
//
// With the default (budgeted) markers: spin, the stream's first op, is
// marked; oob_store, launched right after it, is not, nor are the empty
// kernels until 31 went unmarked or 100 us of host time passed: "one of
// these N ops" (N at most 32), oob_store first in stream order (no op of the
// window ever completed). Exact only if the host was slow enough to mark
// oob_store itself.
//
// run_ahead.cu: the host runs far ahead of the GPU (issue 15, item 1). A spin
// kernel holds the legacy stream for ~300 ms; behind it the culprit
// (oob_store, a store through address 0x10) and then up to 100,000 empty
// kernels are launched. Launches return at once until the driver's launch
// queue is full; then a launch waits for room, the spin ends, the culprit
// faults and the remaining launches return 700. Far more ops than the ring
// keeps (CUDABLAME_RING, 256) are queued behind the culprit, and the GPU is
// busy with an earlier, healthy op (the spin) while they are launched: the
// culprit must still be named, exactly, with its launch stack.
//
// Prints launched_after=N (launches that returned success after the culprit)
// and first_error_at=K (the index of the first launch that returned an error,
// or -1). Expected without the shim: "sample-error: cudaErrorIllegalAddress at
// cudaDeviceSynchronize()" and exit 1. With the shim: the same, plus the report.
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

__global__ void oob_store(int* p) { p[threadIdx.x] = 1; }

__global__ void empty() {}

__attribute__((noinline)) void launch_culprit() {
    oob_store<<<1, 32>>>(reinterpret_cast<int*>(0x10));
    __asm__ volatile("" ::: "memory");  // keeps this frame: no tail call into the launch stub
}

int main() {
    CHECK(cudaFree(nullptr));
    spin<<<1, 1>>>(600000000LL);  // ~300 ms at ~2 GHz
    launch_culprit();
    int ok = 0, first_error = -1;
    for (int i = 0; i < 100000; i++) {
        empty<<<1, 32>>>();
        if (cudaPeekAtLastError() == cudaSuccess) {
            ok++;
        } else if (first_error < 0) {
            first_error = i;
        }
    }
    printf("launched_after=%d\nfirst_error_at=%d\n", ok, first_error);
    CHECK(cudaDeviceSynchronize());
    printf("no error\n");
    return 0;
}
