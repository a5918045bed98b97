// EXPECT kernel=count_private site=launch_count error=CUDA_ERROR_INVALID_ADDRESS_SPACE confidence=exact reporter=cuCtxSynchronize
// EXPECT-OPTIONAL
//
// address_space.cu: an atomic on a pointer into a thread's *local* memory
// (its stack). PTX allows atom/red only on .global and .shared addresses
// (with generic addressing: addresses that point there); on the GPU a
// generic atomic that lands in the local window raises "Warp Invalid
// Address Space" (cuda-gdb's CUDA_EXCEPTION_7; seen for a RED.E.ADD on a
// stack address in EnzymeAD/Enzyme.jl#428), which the driver reports as
// cudaErrorInvalidAddressSpace (717, sticky).
//
// The bug: a per-thread counter array is "registered" in a global table of
// counter pointers that other code updates with atomicAdd, as if it were
// shared or global memory. The pointer is read back from global memory
// (volatile), so neither the compiler nor ptxas can tell it points to local
// memory: the atomicAdd is a generic ATOM at run time.
//
// Timeline (legacy default stream):
//   launch_count()    count_private  -> CULPRIT: generic atom on a local address
//   cudaDeviceSynchronize()          -> REPORTS (cuCtxSynchronize_v2)
//
// EXPECT-OPTIONAL: this is undefined behaviour in PTX terms, not a
// documented trigger, so it is the least certain case: should the H200
// perform the atomic silently, the program exits 0, no report is written
// and gpu-check counts the case as skipped. Should it fault with another
// code (700), the case fails with that code in its details.
//
// Expected: "sample-error: cudaErrorInvalidAddressSpace at
// cudaDeviceSynchronize() ...", exit 1.
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

__global__ void count_private(const int* keys, int n, unsigned long long* table, int* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int counts[4] = {0, 0, 0, 0};  // thread-private: local memory (its address escapes)
    // BUG: publishes a local-memory address where a global one belongs.
    table[t] = reinterpret_cast<unsigned long long>(&counts[0]);
    int* bucket = reinterpret_cast<int*>(reinterpret_cast<volatile unsigned long long*>(table)[t]);
    int sum = 0;
    for (int i = t; i < n; i += gridDim.x * blockDim.x) sum += atomicAdd(&bucket[keys[i] & 3], 1);
    out[t] = sum + counts[0] + counts[1] + counts[2] + counts[3];
}

__attribute__((noinline)) cudaError_t launch_count(const int* keys, int n,
                                                   unsigned long long* table, int* out) {
    count_private<<<2, 128>>>(keys, n, table, out);
    return cudaGetLastError();
}

int main() {
    const int n = 4096, threads = 256;
    int *keys = nullptr, *out = nullptr;
    unsigned long long* table = nullptr;
    CHECK(cudaMalloc(&keys, n * sizeof(int)));
    CHECK(cudaMalloc(&out, threads * sizeof(int)));
    CHECK(cudaMalloc(&table, threads * sizeof(unsigned long long)));
    CHECK(cudaMemset(keys, 0, n * sizeof(int)));
    CHECK(cudaDeviceSynchronize());
    CHECK(launch_count(keys, n, table, out));
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error (EXPECT-OPTIONAL case)\n");
    return 0;
}
