// EXPECT kernel=ptx_scatter site=launch_ptx_kernel error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuMemcpyDtoH
// BUILD-FLAGS: -lcuda
//
// driver_api.cu: a pure driver-API program (a JIT / plugin host): kernels
// come from a PTX string embedded in the program, loaded with
// cuModuleLoadData, looked up with cuModuleGetFunction and launched with
// cuLaunchKernel. No runtime API call at all (nvcc links cudart anyway; it
// stays unused). Built with -lcuda (BUILD-FLAGS): the program calls the
// driver by symbol, which the shim exports.
//
// Timeline (primary context, legacy default stream, NULL stream handle):
//   launch_ptx_kernel(ptx_fill, buf)     -> good; cuStreamSynchronize(0) proves it done
//   launch_ptx_kernel(ptx_scatter, 0x10) -> CULPRIT: same body, but the host
//                                           hands it a bogus pointer -> 700
//   cuMemcpyDtoH(host, buf)              -> REPORTS (cuda.h maps it to
//                                           cuMemcpyDtoH_v2)
//
// The kernel name comes from the cuModuleGetFunction lookup ("ptx_scatter";
// PTX names are not mangled). site= is the host function that calls
// cuLaunchKernel.
//
// Expected: "sample-error: CUDA_ERROR_ILLEGAL_ADDRESS at cuMemcpyDtoH(...)
// ...", exit 1.
#include <cstdio>
#include <cuda.h>

#include "check.h"

// Two kernels with the same body: out[i] = i for i < n.
// PTX ISA 8.0 (CUDA 12.0), target sm_75: the driver JIT-compiles it for the GPU.
#include "driver_ptx.cuh"  // PTX_STORE_INDEX_KERNEL

static const char kPtx[] =
    ".version 8.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n" PTX_STORE_INDEX_KERNEL("ptx_fill") "\n" PTX_STORE_INDEX_KERNEL("ptx_scatter");

__attribute__((noinline)) CUresult launch_ptx_kernel(CUfunction f, CUdeviceptr out, int n) {
    void* args[] = {&out, &n};
    CUresult r = cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr);
    if (r != CUDA_SUCCESS) fprintf(stderr, "launch_ptx_kernel: launch failed (%d)\n", int(r));
    return r;
}

int main() {
    const int n = 1024;
    static int host[n];
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fill, scatter;
    CUdeviceptr buf;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    CU_CHECK(cuModuleLoadData(&mod, kPtx));
    CU_CHECK(cuModuleGetFunction(&fill, mod, "ptx_fill"));
    CU_CHECK(cuModuleGetFunction(&scatter, mod, "ptx_scatter"));
    CU_CHECK(cuMemAlloc(&buf, n * sizeof(int)));

    CU_CHECK(launch_ptx_kernel(fill, buf, n));
    CU_CHECK(cuStreamSynchronize(nullptr));
    // BUG: the output handle of the second pass was never filled in.
    CU_CHECK(launch_ptx_kernel(scatter, CUdeviceptr(0x10), n));
    CU_CHECK(cuMemcpyDtoH(host, buf, n * sizeof(int)));
    printf("unexpected: no error, host[1]=%d\n", host[1]);
    return 0;
}
