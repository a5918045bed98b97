// late_fault.cuh: the culprit shared by the site_*.cu samples (one sample per
// CUDA call that can be the one to report a sticky error). Not a sample
// itself: gpu-check.sh builds only cuda-samples/*.cu.
//
// The culprit kernel, late_fault, first waits kFaultDelayNs on the GPU and
// then stores through a bogus pointer (0x10, never mapped on the GPU or the
// CPU; see oob_write.cu), so the GPU faults with 700
// (cudaErrorIllegalAddress, sticky) about 10 ms after the launch. The delay
// makes the timeline of each sample deterministic:
//   - everything the host enqueues right after the launch (an event record,
//     ...) is done long before the fault, so it cannot be the one to report
//     it;
//   - the host then sleeps kAfterFaultUs (wait_for_fault), 20x the delay, so
//     the fault has happened and the context is dead before the reporting
//     call, which then returns the error immediately, whatever kind of call
//     it is. (The sleep also covers the driver's fault handling, a few ms.)
// Each sample is then: warm up, launch_late_fault() (the site= of every
// site_*.cu EXPECT line), wait_for_fault(), the reporting call. A backstop
// cudaDeviceSynchronize() after the reporting call makes the program fail
// anyway if that call unexpectedly succeeded (the report then names
// cuCtxSynchronize and gpu-check's reporter= check says so).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>
#include <unistd.h>

#include "check.h"

constexpr long long kFaultDelayNs = 10LL * 1000 * 1000;  // 10 ms on the GPU
constexpr useconds_t kAfterFaultUs = 200 * 1000;         // 200 ms on the host

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void warm_up(int* buf, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] = i;
}

// The culprit: waits delay_ns, then writes through `out` (0x10).
__global__ void late_fault(int* out, long long delay_ns) {
    unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < delay_ns) __nanosleep(1000);
    out[threadIdx.x] = threadIdx.x;
}

// Launch sites: noinline and non-static so they show up in the shim's native
// stack; each does something after its launch so the launch is no tail call.
__attribute__((noinline)) cudaError_t launch_warm_up(int* buf, int n, cudaStream_t s) {
    warm_up<<<(n + 255) / 256, 256, 0, s>>>(buf, n);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_late_fault(cudaStream_t s) {
    // BUG: an output pointer that was never set up.
    int* stale = reinterpret_cast<int*>(uintptr_t(0x10));
    late_fault<<<1, 32, 0, s>>>(stale, kFaultDelayNs);
    return cudaGetLastError();
}

// The host "does other work" until the GPU has certainly faulted.
inline void wait_for_fault() { usleep(kAfterFaultUs); }
