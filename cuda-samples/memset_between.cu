// EXPECT kernel=slow_oob site=launch_slow_oob error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact|oneof among=slow_oob
// EXPECT-EVERY confidence=exact
//
// With the default (budgeted) markers slow_oob is marked only if enough
// host time passed since the stream's last marker; else the window runs
// from slow_oob to the next marked op (copies are marked): one of 2 or 3
// ops, slow_oob ranked first (the memset and copy run no user code).
//
// memset_between.cu: a cudaMemset and a device-to-device cudaMemcpy between a
// faulting kernel and a good one. Per the CUDA driver API's "API
// synchronization behavior" section, a memset of device memory is
// asynchronous with respect to the host, and a device-to-device copy performs
// no host-side synchronization: both return while the faulting kernel still
// runs. They prove nothing about earlier work (issue 14, item 1; before the
// fix cudablame took them for synchronizations and blamed good_after).
//
// Timeline (legacy default stream):
//   fill                                 -> good; cudaDeviceSynchronize proves it done
//   launch_slow_oob()  slow_oob          -> CULPRIT: spins ~50 ms, then writes
//                                           through a near-null pointer (700)
//   cudaMemset(buf)                      -> returns cudaSuccess at once
//   cudaMemcpy(buf2, buf, DeviceToDevice)-> returns cudaSuccess at once
//   good_after                           -> good kernel queued behind them
//   cudaMemcpy(DtoH)                     -> REPORTS cudaErrorIllegalAddress
//
// See oob_write.cu for why the bad pointer is 0x10. The spin makes sure the
// memset and the copy return before the fault (they would report the error
// themselves otherwise, and the sample would fail the same way with and
// without the shim, but not test anything).
//
// No reporter= in EXPECT: which driver entry points the runtime uses for
// cudaMemset and a device-to-device cudaMemcpy (plain or Async plus a sync) is
// the runtime's business; the read-back is expected to report it.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaMemcpy(host, ...)",
// exit 1.
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void fill(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i;
}

// Spins for `cycles` clock cycles, then stores through `out`.
__global__ void slow_oob(int* out, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    out[threadIdx.x] = 1;
}

__global__ void good_after(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += 1;
}

__attribute__((noinline)) void launch_slow_oob(int* bad) {
    slow_oob<<<1, 32>>>(bad, 100000000LL);  // ~50 ms at ~2 GHz
    __asm__ volatile("" ::: "memory");  // keeps this frame: no tail call into the launch stub
}

int main() {
    const int n = 1 << 16;
    static int host[n];
    int *buf, *buf2;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(cudaMalloc(&buf2, n * sizeof(int)));
    fill<<<n / 256, 256>>>(buf, n);
    CHECK(cudaDeviceSynchronize());

    launch_slow_oob(reinterpret_cast<int*>(0x10));
    CHECK(cudaMemset(buf, 0, n * sizeof(int)));
    CHECK(cudaMemcpy(buf2, buf, n * sizeof(int), cudaMemcpyDeviceToDevice));
    good_after<<<n / 256, 256>>>(buf2, n);
    CHECK(cudaMemcpy(host, buf2, n * sizeof(int), cudaMemcpyDeviceToHost));
    printf("unexpected: no error, host[1]=%d\n", host[1]);
    return 0;
}
