// EXPECT kernel=flush_tile site=launch_flush_tile error=CUDA_ERROR_INVALID_ADDRESS_SPACE confidence=exact|oneof reporter=cuCtxSynchronize
// EXPECT-OPTIONAL
//
// address_space.cu: a store with the .global state space through the
// generic address of shared (then local) memory.
//
// Generic addresses cover all state spaces: the GPU carves a shared-memory
// window and a local-memory window out of the generic address space, and a
// generic ld/st/atom is routed by the window its address falls in. An
// instruction with an explicit state space is not routed: st.global takes
// its address as a global address (PTX: using a generic address of another
// state space with it is undefined). The hardware flags such an access as
// "Warp Invalid Address Space" (cuda-gdb's CUDA_EXCEPTION_7: "an
// instruction accesses a memory space not permitted for that
// instruction"), which the driver reports as cudaErrorInvalidAddressSpace
// (717, sticky). Evidence on the H200: triton_oob.py's st.global stores,
// 1-3 GiB past a PyTorch tensor, fault with 717, not 700 (see its header):
// plausibly they land in one of those windows, while a global store to
// plain unmapped memory (0x10, oob_write.cu) gives 700.
//
// The bug: flush_tile stages its results in shared memory and writes them
// out with st.global (as hand-written PTX, or the cache-hint intrinsics
// __stcg/__stwt, do: no generic-to-global conversion of the pointer). The
// destination comes from a table of per-tile output pointers, and the entry
// for this tile was filled with the staging buffer's own (generic, shared-
// window) address instead of the output's. Attempt 2 does the same with a
// thread's stack array (local window), in case attempt 1 passes silently.
// The pointers are read back from global memory (volatile), so neither the
// compiler nor ptxas can tell where they point.
//
// An earlier version made a generic atomicAdd on a stack address (a RED on
// one raised CUDA_EXCEPTION_7 in EnzymeAD/Enzyme.jl#428); on the H200 no
// 717 came (the case was skipped). Presumably a generic instruction is
// routed by the window its address lies in, so the hardware had no wrong
// state space to reject; an explicit .global on a window address has one.
//
// Timeline (legacy default stream):
//   launch_flush_tile()   flush_tile  -> CULPRIT: st.global into the shared
//                                        window (attempt 1), else into the
//                                        local window (attempt 2)
//   cudaDeviceSynchronize()           -> REPORTS (cuCtxSynchronize_v2)
//
// Diagnostics: before each attempt the kernel notes its number, and the two
// generic addresses, in host-mapped pinned memory (readable after the
// context died); main prints them as one "address_space-diag:" line on
// stderr after the synchronize, whatever it returned.
//
// EXPECT-OPTIONAL: this is undefined behaviour in PTX terms, not a
// documented trigger, so it is the least certain case: should the H200
// perform both stores silently, the program exits 0, no report is written
// and gpu-check counts the case as skipped (the diag line then says
// "attempt 3": both passed). Should it fault with another code (700), the
// case fails with that code in its details.
//
// Expected: "sample-error: cudaErrorInvalidAddressSpace at
// cudaDeviceSynchronize() ...", exit 1.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#include "check.h"

constexpr int kThreads = 128;

// Written by thread 0 into host-mapped memory before each attempt.
struct Diag {
    int attempt;                      // 1, 2; 3 = both stores passed
    unsigned long long shared_addr;   // the generic address attempt 1 stores to
    unsigned long long local_addr;    // the generic address attempt 2 stores to
};

// A store with the .global state space, on the address as given.
__device__ __forceinline__ void st_global(float* p, float v) {
    asm volatile("st.global.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}

__device__ void note_attempt(Diag* d, int attempt, const float* s, const float* l) {
    if (threadIdx.x == 0) {
        volatile Diag* v = d;
        v->shared_addr = reinterpret_cast<unsigned long long>(s);
        v->local_addr = reinterpret_cast<unsigned long long>(l);
        v->attempt = attempt;
        __threadfence_system();
    }
    __syncthreads();
}

// One block of kThreads threads.
__global__ void flush_tile(const float* in, float* out, unsigned long long* table, Diag* d) {
    __shared__ float tile[kThreads];
    float scratch[4];  // thread-private: local memory (its address escapes)
    const int t = threadIdx.x;
    tile[t] = in[t] * 2.0f;
    for (int j = 0; j < 4; ++j) scratch[j] = tile[t] + float(j);
    // BUG: the output table gets the staging buffers' addresses (shared, then
    // local memory) where the output's global address belongs.
    table[t] = reinterpret_cast<unsigned long long>(&tile[t]);
    table[blockDim.x + t] = reinterpret_cast<unsigned long long>(&scratch[t & 3]);
    __syncthreads();
    volatile unsigned long long* vt = table;
    float* dst_shared = reinterpret_cast<float*>(vt[t]);
    float* dst_local = reinterpret_cast<float*>(vt[blockDim.x + t]);

    note_attempt(d, 1, dst_shared, dst_local);
    st_global(dst_shared, tile[t]);  // attempt 1: st.global into the shared window
    __syncthreads();
    note_attempt(d, 2, dst_shared, dst_local);
    st_global(dst_local, tile[t]);  // attempt 2: st.global into the local window
    __syncthreads();
    note_attempt(d, 3, dst_shared, dst_local);
    out[t] = tile[t] + scratch[0] + scratch[1] + scratch[2] + scratch[3];
}

__attribute__((noinline)) cudaError_t launch_flush_tile(const float* in, float* out,
                                                        unsigned long long* table, Diag* d) {
    flush_tile<<<1, kThreads>>>(in, out, table, d);
    return cudaGetLastError();
}

int main() {
    float *in = nullptr, *out = nullptr;
    unsigned long long* table = nullptr;
    CHECK(cudaMalloc(&in, kThreads * sizeof(float)));
    CHECK(cudaMalloc(&out, kThreads * sizeof(float)));
    CHECK(cudaMalloc(&table, 2 * kThreads * sizeof(unsigned long long)));
    CHECK(cudaMemset(in, 0, kThreads * sizeof(float)));
    void* host_addr = nullptr;
    void* dev_addr = nullptr;
    CHECK(cudaHostAlloc(&host_addr, sizeof(Diag), cudaHostAllocMapped));
    memset(host_addr, 0, sizeof(Diag));
    CHECK(cudaHostGetDevicePointer(&dev_addr, host_addr, 0));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_flush_tile(in, out, table, static_cast<Diag*>(dev_addr)));
    const cudaError_t synced = cudaDeviceSynchronize();  // REPORTS
    const volatile Diag* diag = static_cast<const volatile Diag*>(host_addr);
    fprintf(stderr,
            "address_space-diag: after cudaDeviceSynchronize() (%s): last attempt %d "
            "(1: st.global to shared window address %#llx, 2: to local window address %#llx, "
            "3: both passed)\n",
            cudaGetErrorName(synced), diag->attempt, diag->shared_addr, diag->local_addr);
    if (synced != cudaSuccess) return sample_error(synced, "cudaDeviceSynchronize()");
    printf("unexpected: no error (EXPECT-OPTIONAL case)\n");
    return 0;
}
