// EXPECT kernel=misaligned_store site=launch_misaligned error=CUDA_ERROR_MISALIGNED_ADDRESS confidence=exact reporter=cuCtxSynchronize
//
// misaligned.cu: an 8-byte store to an address that is only 4-byte aligned.
//
// The kernel reinterprets (buf + byte_offset) as long long*; with
// byte_offset = 4 every 64-bit store is misaligned and the GPU raises
// "misaligned address" (cudaErrorMisalignedAddress, driver 716, sticky).
// byte_offset is a kernel argument so the compiler cannot see the problem and
// emits a plain 64-bit ST.
//
// Timeline (legacy default stream):
//   launch_clear()       clear_bytes        -> good
//   launch_misaligned()  misaligned_store   -> CULPRIT, 716
//   cudaDeviceSynchronize() (driver: cuCtxSynchronize_v2) -> REPORTS it
//
// Expected: "sample-error: cudaErrorMisalignedAddress at
// cudaDeviceSynchronize() ...", exit 1.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "check.h"

__global__ void clear_bytes(char* buf, int nbytes) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nbytes) buf[i] = 0;
}

__global__ void misaligned_store(char* buf, int byte_offset, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        long long* p = reinterpret_cast<long long*>(buf + byte_offset);
        p[i] = 0x0123456789abcdefLL + i;
    }
}

__attribute__((noinline)) cudaError_t launch_clear(char* buf, int nbytes) {
    clear_bytes<<<(nbytes + 255) / 256, 256>>>(buf, nbytes);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_misaligned(char* buf, int byte_offset, int n) {
    misaligned_store<<<(n + 127) / 128, 128>>>(buf, byte_offset, n);
    return cudaGetLastError();
}

int main(int argc, char** argv) {
    const int n = 256;
    const int nbytes = (n + 1) * 8;
    // 4 unless overridden: lets a curious reader run "./misaligned 0" to see
    // the aligned (working) variant.
    int byte_offset = argc > 1 ? atoi(argv[1]) : 4;
    char* buf = nullptr;
    CHECK(cudaMalloc(&buf, nbytes));
    CHECK(launch_clear(buf, nbytes));
    CHECK(launch_misaligned(buf, byte_offset, n));
    CHECK(cudaDeviceSynchronize());
    printf("no error (byte_offset=%d)\n", byte_offset);
    return 0;
}
