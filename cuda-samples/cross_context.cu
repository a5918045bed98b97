// EXPECT kernel=ptx_scatter error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=oneof among=ptx_slow reporter=cuMemAlloc
// EXPECT-EVERY window=2
// BUILD-FLAGS: -lcuda
//
// cross_context.cu: a fault in context A noticed by a call in context B of the same device.
// A fault stops the whole device, not one context: with B current, B's own cuMemAlloc returns
// A's 700 while B's kernel was healthy (measured on the H200, driver 580.159.04; cuCtxSynchronize
// in B returns it too). Before the fix cudablame judged only the reporting context (B) and said
// "culprit: ptx_slow (op #1, exact)", B's healthy kernel. Now every context of the device is
// judged: "one of these N ops", ptx_scatter and the running ptx_slow among them (with a marker
// after every op, exactly those 2: EXPECT-EVERY).
//
// Timeline:
//   B = cuCtxCreate(dev 0), then A = cuCtxCreate(dev 0) (A current); stream sA (non-blocking)
//   cuCtxSetCurrent(B): launch_in_context(ptx_slow, NULL) x5   -> B busy for about 1 s
//   cuCtxSetCurrent(A): launch_in_context(ptx_scatter, sA, 0x10) -> CULPRIT (700)
//   cuCtxSetCurrent(B); sleep 300 ms; cuMemAlloc                  -> REPORTS 700
//
// Expected: "sample-error: CUDA_ERROR_ILLEGAL_ADDRESS at cuMemAlloc(&p, 256) ...", exit 1.
#include <cstdio>
#include <cuda.h>
#include <unistd.h>

#include "check.h"

#define PTX_WITH_CONTEXT_HELPERS
#include "driver_ptx.cuh"

int main() {
    const int n = 1024;
    CUdevice dev;
    CUcontext a, b;
    CUmodule mod_a, mod_b;
    CUfunction scatter, slow;
    CUstream sa;
    CUdeviceptr buf_b, p;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    // Both contexts exist before the fault: on driver 580 a cuCtxCreate after a sticky error in
    // another context of the process returns that error too.
    CU_CHECK(create_context(&b, dev));
    CU_CHECK(cuModuleLoadData(&mod_b, kPtx));
    CU_CHECK(cuModuleGetFunction(&slow, mod_b, "ptx_slow"));
    CU_CHECK(cuMemAlloc(&buf_b, n * sizeof(int)));
    CU_CHECK(create_context(&a, dev));  // pushes A
    CU_CHECK(cuModuleLoadData(&mod_a, kPtx));
    CU_CHECK(cuModuleGetFunction(&scatter, mod_a, "ptx_scatter"));
    CU_CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));

    CU_CHECK(cuCtxSetCurrent(b));
    for (int i = 0; i < 5; i++) CU_CHECK(launch_in_context(slow, nullptr, buf_b, 1));
    CU_CHECK(cuCtxSetCurrent(a));
    // BUG: the output handle was never filled in.
    CU_CHECK(launch_in_context(scatter, sa, CUdeviceptr(0x10), n));
    CU_CHECK(cuCtxSetCurrent(b));
    usleep(300 * 1000);
    CU_CHECK(cuMemAlloc(&p, 256));
    printf("unexpected: no error\n");
    return 0;
}
