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
//   - the host then waits until the kernel says, through a flag in mapped
//     pinned memory, that it is about to store (wait_for_fault), and sleeps
//     kAfterFaultUs more, so the fault has happened and the context is dead
//     before the reporting call, which then returns the error immediately,
//     whatever kind of call it is. (The sleep covers the driver's fault
//     handling, a few ms.) The flag matters when the GPU is shared: with
//     another process's work time-sliced in, the kernel once started more
//     than 200 ms after its launch, so a plain sleep let the reporting call
//     succeed (gpu-check, eighth session, site_next_launch.static).
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

__global__ void warm_up(int* buf, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] = i;
}

// Set by late_fault just before its bad store; read by wait_for_fault.
// Mapped pinned memory, allocated by launch_late_fault before its launch.
inline volatile int*& fault_flag() {
    static volatile int* flag = nullptr;
    return flag;
}

// The culprit: waits delay_ns, raises *about_to_fault, then writes through
// `out` (0x10).
__global__ void late_fault(int* out, long long delay_ns, volatile int* about_to_fault) {
    unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < delay_ns) __nanosleep(1000);
    if (threadIdx.x == 0) *about_to_fault = 1;
    __threadfence_system();
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
    if (!fault_flag()) {
        void* p = nullptr;
        cudaError_t e = cudaHostAlloc(&p, sizeof(int), cudaHostAllocMapped);
        if (e != cudaSuccess) return e;
        fault_flag() = static_cast<volatile int*>(p);
    }
    *fault_flag() = 0;
    late_fault<<<1, 32, 0, s>>>(stale, kFaultDelayNs, fault_flag());
    return cudaGetLastError();
}

// The host "does other work" until the GPU has certainly faulted: until the
// culprit raised its flag (at most 30 s, then the sample goes on and its
// backstop says what happened), then kAfterFaultUs more.
inline void wait_for_fault() {
    for (int i = 0; i < 30000 && fault_flag() && !*fault_flag(); i++) usleep(1000);
    usleep(kAfterFaultUs);
}
