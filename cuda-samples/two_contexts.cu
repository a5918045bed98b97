// EXPECT kernel=ptx_scatter error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=oneof among=ptx_slow reporter=cuStreamSynchronize
// EXPECT-EVERY window=2
// BUILD-FLAGS: -lcuda
//
// two_contexts.cu: two driver-API contexts on device 0. The culprit faults on
// a stream of context A; then context B is made current and a long kernel is
// launched there; the program synchronizes A's stream, which reports the
// error. Issue 14, item 2: cudablame then looked at the reporting thread's
// current context (B) and named ptx_slow, "exact". A fault stops the whole
// device, not one context (cross_context.cu: B's own calls return A's 700), and
// nothing recorded tells whether ptx_slow started before the fault: every
// context of the device is judged, and the verdict is "one of these N ops" with
// ptx_scatter and ptx_slow among them (exactly those 2 with a marker after every
// op: EXPECT-EVERY), never exact on either.
//
// Timeline:
//   B = cuCtxCreate(dev 0), then A = cuCtxCreate(dev 0); stream sA (non-blocking)
//   launch_in_context(ptx_fill, sA)      -> good; cuStreamSynchronize(sA)
//   launch_in_context(ptx_scatter, sA, 0x10) -> CULPRIT (700 in context A)
//   cuCtxSetCurrent(B)
//   launch_in_context(ptx_slow, NULL)    -> spins ~200 ms in context B
//   cuStreamSynchronize(sA)              -> REPORTS CUDA_ERROR_ILLEGAL_ADDRESS
//
// Expected: "sample-error: CUDA_ERROR_ILLEGAL_ADDRESS at
// cuStreamSynchronize(sa) ...", exit 1.
#include <cstdio>
#include <cuda.h>

#include "check.h"

#define PTX_WITH_CONTEXT_HELPERS
#include "driver_ptx.cuh"

int main() {
    const int n = 1024;
    CUdevice dev;
    CUcontext a, b;
    CUmodule mod_a, mod_b;
    CUfunction fill, scatter, slow;
    CUstream sa;
    CUdeviceptr buf, buf_b;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    // Both contexts exist before the fault: on driver 580 a cuCtxCreate after a sticky error in
    // another context of the process returns that error too (measured on the H200).
    CU_CHECK(create_context(&b, dev));
    CU_CHECK(cuModuleLoadData(&mod_b, kPtx));
    CU_CHECK(cuModuleGetFunction(&slow, mod_b, "ptx_slow"));
    CU_CHECK(cuMemAlloc(&buf_b, n * sizeof(int)));
    CU_CHECK(create_context(&a, dev));  // pushes A: current from here on
    CU_CHECK(cuModuleLoadData(&mod_a, kPtx));
    CU_CHECK(cuModuleGetFunction(&fill, mod_a, "ptx_fill"));
    CU_CHECK(cuModuleGetFunction(&scatter, mod_a, "ptx_scatter"));
    CU_CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemAlloc(&buf, n * sizeof(int)));
    CU_CHECK(launch_in_context(fill, sa, buf, n));
    CU_CHECK(cuStreamSynchronize(sa));
    // BUG: the output handle of the second pass was never filled in.
    CU_CHECK(launch_in_context(scatter, sa, CUdeviceptr(0x10), n));

    CU_CHECK(cuCtxSetCurrent(b));  // B current from here on
    CU_CHECK(launch_in_context(slow, nullptr, buf_b, 1));
    CU_CHECK(cuStreamSynchronize(sa));
    printf("unexpected: no error\n");
    return 0;
}
