// EXPECT kernel=dtor_oob site=launch_dtor_oob error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuMemFree
//
// global_dtor.cu: the error surfaces in a global object's destructor. main()
// launches the culprit and returns without synchronizing; the destructor of a
// global buffer holder frees its memory (cudaFree), which reports the fault.
// C++ static destructors run after glibc destroyed the main thread's
// thread-local storage (exit() calls the TLS destructors first): every
// thread-local cudablame uses on the hook path must degrade there, never
// panic and turn cudablame off (issue 14, item 4; before the fix: "cudablame:
// internal error (cannot access a Thread Local Storage value during or after
// destruction ...)" and no report).
//
// The holder's constructor makes the first CUDA runtime call, so the runtime
// registers its own exit-time teardown before the holder's destructor is
// registered, and the destructor still finds a working runtime.
//
// Timeline:
//   Holder() cudaMalloc                   (static initialization)
//   main: fill x 2, cudaDeviceSynchronize -> good
//   launch_dtor_oob()  dtor_oob           -> CULPRIT: writes through 0x10 (700)
//   return 0 from main
//   ~Holder(): cudaFree                   -> REPORTS cudaErrorIllegalAddress
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaFree in ~Holder",
// exit 1 (the destructor calls _exit(1)).
#include <cstdio>
#include <cuda_runtime.h>
#include <unistd.h>

#include "check.h"

__global__ void fill(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i;
}

__global__ void dtor_oob(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i;
}

struct Holder {
    int* buf = nullptr;
    Holder() {
        if (cudaMalloc(&buf, 1 << 20) != cudaSuccess) buf = nullptr;
    }
    ~Holder() {
        cudaError_t e = cudaFree(buf);
        if (e != cudaSuccess) {
            sample_error(e, "cudaFree in ~Holder");
            fflush(stdout);
            _exit(1);
        }
    }
};

static Holder holder;

__attribute__((noinline)) void launch_dtor_oob(int n) {
    dtor_oob<<<(n + 255) / 256, 256>>>(reinterpret_cast<int*>(0x10), n);
    __asm__ volatile("" ::: "memory");  // keeps this frame: no tail call into the launch stub
}

int main() {
    const int n = 1 << 18;
    if (!holder.buf) return sample_error(cudaErrorMemoryAllocation, "cudaMalloc in Holder()");
    for (int i = 0; i < 2; i++) fill<<<n / 256, 256>>>(holder.buf, n);
    CHECK(cudaDeviceSynchronize());
    launch_dtor_oob(n);
    return 0;  // no synchronization: the destructor's cudaFree notices the fault
}
