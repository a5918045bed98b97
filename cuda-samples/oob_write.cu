// EXPECT kernel=oob_write site=launch_oob_write error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact|oneof reporter=cuMemcpyDtoH among=oob_write
// EXPECT-EVERY confidence=exact
//
// With the default (budgeted) markers oob_write gets a marker only when
// enough host time passed since the stream's last one (the idle gap after
// the synchronization, 50 us): usually not, so the window is oob_write and
// the follow-ups up to the next marked op, "one of these 3 ops" with
// oob_write first (it never completed before; scale and add_one did).
// Timing decides: exact or oneof, oob_write among the ops either way.
//
// oob_write.cu: the classic "the error shows up at a memcpy, but the bug is in
// a kernel launched earlier" case.
//
// Timeline (all on the legacy default stream, so the kernels run in order):
//   launch_warmup()     fill, scale, add_one      -> good kernels, complete fine
//   launch_oob_write()  oob_write                 -> CULPRIT: writes through a
//                                                    bogus device pointer, the GPU
//                                                    faults with 700
//   launch_followups()  scale, add_one            -> good kernels queued after the
//                                                    culprit; they never run (the
//                                                    context is dead) and must NOT
//                                                    be blamed
//   cudaMemcpy(DtoH)                              -> REPORTS cudaErrorIllegalAddress
//
// Why a near-null pointer instead of "index 1<<28 past a small allocation":
// on an H200 with HMM (driver 580, open kernel modules) a wild address that
// happens to be valid in the *CPU* address space is silently accessible from
// the GPU, and far-away device addresses may belong to another (runtime-
// internal) allocation. Address 0x10 is below vm.mmap_min_addr and never
// mapped on either side, so the store faults with 700 every time. The kernel
// itself is an ordinary "out[i] = ..." store; the bug is the pointer the host
// hands it (as if a struct field was never initialised).
//
// cudaMemcpy DtoH into pageable memory goes through the driver's
// cuMemcpyDtoH_v2 (checked with cuda-gdb on CUDA 13.0 / driver 580, static and
// shared cudart), hence reporter=cuMemcpyDtoH. In principle a launch may also
// return errors of earlier asynchronous work, so one of the follow-up launches
// could report it instead; but they are issued microseconds after the culprit
// while fault recovery takes far longer, and on the H200 the memcpy reported it
// in every run.
//
// Expected without the shim: prints "sample-error: cudaErrorIllegalAddress at
// cudaMemcpy ..." and exits 1. With the shim: the same, plus the report.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void fill(int* out, int n, int value) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value;
}

__global__ void scale(int* out, int n, int factor) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] *= factor;
}

__global__ void add_one(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += 1;
}

// The culprit. Nothing wrong with the kernel body per se: it trusts `out`.
__global__ void oob_write(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i;
}

// Host launch sites are noinline and non-static so their symbols survive in
// the binary and show up in the shim's native stack. Each one does something
// after its last launch (cudaGetLastError) so the launch is never a tail call
// that would drop the site's frame.
__attribute__((noinline)) cudaError_t launch_warmup(int* buf, int n) {
    int blocks = (n + 255) / 256;
    fill<<<blocks, 256>>>(buf, n, 3);
    scale<<<blocks, 256>>>(buf, n, 2);
    add_one<<<blocks, 256>>>(buf, n);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_oob_write(int n) {
    // BUG: should be the real buffer; instead a never-initialised field.
    int* stale = reinterpret_cast<int*>(uintptr_t(0x10));
    oob_write<<<(n + 255) / 256, 256>>>(stale, n);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_followups(int* buf, int n) {
    int blocks = (n + 255) / 256;
    scale<<<blocks, 256>>>(buf, n, 5);
    add_one<<<blocks, 256>>>(buf, n);
    return cudaGetLastError();
}

int main() {
    const int n = 1024;
    int* buf = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(launch_warmup(buf, n));
    CHECK(cudaDeviceSynchronize());  // the warm-up kernels are definitely done
    CHECK(launch_oob_write(n));
    CHECK(launch_followups(buf, n));
    static int host[n];
    CHECK(cudaMemcpy(host, buf, n * sizeof(int), cudaMemcpyDeviceToHost));
    printf("unexpected: no error, host[0]=%d\n", host[0]);
    return 0;
}
