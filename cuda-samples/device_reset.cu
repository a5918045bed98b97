// EXPECT kernel=first_oob site=launch_first_oob error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuCtxSynchronize
//
// device_reset.cu: cudaDeviceReset after a fault, then new work. The first
// fault is reported (cudablame reports the first sticky error of a process);
// cudaDeviceReset destroys the primary context (cuDevicePrimaryCtxReset) and
// frees everything allocated in it, including the pinned memory the driver
// handed out. The program then starts again on a fresh primary context, which
// may well get the same handle: cudablame must forget the old context's
// streams and progress-marker slots (issue 14, item 3), never read or write
// freed memory, and never let a marker of the new context land in the old
// context's memory. Checked by transparency: the new work must succeed with
// the shim exactly as without it (a marker written into freed or unmapped
// memory would fault the new context, a host read of freed memory would
// crash the program), and the result must be right.
//
// Timeline:
//   fill x 3                             -> good (markers allocated in context 1)
//   launch_first_oob()  first_oob        -> CULPRIT: writes through 0x10 (700)
//   cudaDeviceSynchronize                -> REPORTS cudaErrorIllegalAddress
//   cudaDeviceReset                      -> context 1 destroyed
//   200 x fill + add_one, memcpy back    -> must succeed and be right (context 2)
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaDeviceSynchronize()"
// (printed, then the program goes on), exit 1 once the new work checked out.
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void fill(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i;
}

__global__ void add_one(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += 1;
}

__global__ void first_oob(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i;
}

__attribute__((noinline)) void launch_first_oob(int n) {
    first_oob<<<(n + 255) / 256, 256>>>(reinterpret_cast<int*>(0x10), n);
    __asm__ volatile("" ::: "memory");  // keeps this frame: no tail call into the launch stub
}

int main() {
    const int n = 1 << 16;
    static int host[n];
    int* buf;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    for (int i = 0; i < 3; i++) fill<<<n / 256, 256>>>(buf, n);
    CHECK(cudaDeviceSynchronize());
    launch_first_oob(n);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaErrorIllegalAddress) {
        return sample_error(e, "cudaDeviceSynchronize() (expected the fault)");
    }
    sample_error(e, "cudaDeviceSynchronize()");

    // Start over on a fresh primary context.
    CHECK(cudaDeviceReset());
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    for (int i = 0; i < 200; i++) {
        fill<<<n / 256, 256>>>(buf, n);
        add_one<<<n / 256, 256>>>(buf, n);
    }
    CHECK(cudaMemcpy(host, buf, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        if (host[i] != i + 1) {
            fprintf(stderr, "sample-error: wrong result after reset at %d: %d\n", i, host[i]);
            return 2;
        }
    }
    CHECK(cudaFree(buf));
    printf("new work after cudaDeviceReset: ok\n");
    return 1;  // the first fault happened
}
