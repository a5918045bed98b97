// EXPECT kernel=decode_records site=launch_decode error=CUDA_ERROR_LAUNCH_FAILED confidence=exact reporter=cuCtxSynchronize
// Measured on the H200 (driver 580.159.04, 2026-11-29): `trap;` gives CUDA_ERROR_LAUNCH_FAILED (719), not 715.
//
// trap.cu: a kernel that aborts itself with the PTX trap instruction
// (asm("trap;"), what __trap() emits): a hand-rolled "release build
// assert" that stops the kernel on corrupt input, without assert()'s
// message and without its cudaErrorAssert.
//
// Timeline (legacy default stream):
//   launch_fill()       fill_records    -> good
//   launch_decode()     decode_records  -> CULPRIT: record 100 has a bad magic
//                                          number, the kernel executes trap
//   cudaDeviceSynchronize()             -> REPORTS (cuCtxSynchronize_v2)
//
// Which error: the CUDA docs only say __trap() "aborts execution and raises
// an interrupt to the host". Reports from Volta-and-later GPUs show a
// trapped kernel failing with "an illegal instruction was encountered"
// (cudaErrorIllegalInstruction, 715; e.g. ROCm/hip#233 for asm("trap;"),
// and Meta's comms pipes tests: "__trap() causes an illegal instruction"),
// while older GPUs gave "unspecified launch failure" (719). We expect 715 on
// the H200. Both are sticky, so the culprit is the same either way; if the
// H200 says 719, change error= to CUDA_ERROR_LAUNCH_FAILED.
//
// Expected: "sample-error: cudaErrorIllegalInstruction at
// cudaDeviceSynchronize() ...", exit 1.
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

constexpr unsigned kMagic = 0xC0DEu;

__global__ void fill_records(unsigned* rec, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) rec[i] = (kMagic << 16) | unsigned(i & 0xffff);
}

__global__ void decode_records(const unsigned* rec, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned r = rec[i];
        if ((r >> 16) != kMagic) asm volatile("trap;");  // corrupt record: abort
        out[i] = int(r & 0xffff);
    }
}

__attribute__((noinline)) cudaError_t launch_fill(unsigned* rec, int n) {
    fill_records<<<(n + 255) / 256, 256>>>(rec, n);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_decode(const unsigned* rec, int* out, int n) {
    decode_records<<<(n + 255) / 256, 256>>>(rec, out, n);
    return cudaGetLastError();
}

int main() {
    const int n = 1024;
    unsigned* rec = nullptr;
    int* out = nullptr;
    CHECK(cudaMalloc(&rec, n * sizeof(unsigned)));
    CHECK(cudaMalloc(&out, n * sizeof(int)));
    CHECK(launch_fill(rec, n));
    // BUG: a partial write clobbers record 100 (the host thinks it patches a payload).
    const unsigned garbage = 0xdeadbeefu;
    CHECK(cudaMemcpy(rec + 100, &garbage, sizeof(garbage), cudaMemcpyHostToDevice));
    CHECK(launch_decode(rec, out, n));
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
