// EXPECT kernel=ptx_scatter site=launch_in_context error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact|oneof reporter=cuStreamSynchronize
// EXPECT-EVERY confidence=exact
// BUILD-FLAGS: -lcuda
//
// marker_other_context.cu: progress-marker memory for a stream whose first op is issued while
// another context is current (issue 19 item 7). Two driver-API contexts on device 0; the first
// op on context B's stream is a copy made while context A is current, so cudablame makes B's
// marker memory then. Before the fix that memory was registered for the current context (A)
// only, without CU_MEMHOSTREGISTER_PORTABLE, and its device address was A's: B's stream could
// not write its markers (a new fault in B, or markers off). The stream is synchronized (must
// succeed: a failure here is cudablame's doing), then B runs ptx_fill and the culprit
// ptx_scatter on that stream, and the sync reports 700. gpu-check.sh runs it also with
// CUDABLAME_MARKERS=every (EXPECT-EVERY: a marker after every op): the culprit must be exact.
// With the default budget ptx_fill has a marker only if enough host time passed since the
// copy's (the stream is idle after the sync), so the verdict is exact or "one of 2".
// A copy may be issued to a stream that is not the current context's ("A memory copy will
// succeed even if it is issued to a stream that is not associated to the current device",
// CUDA C++ Programming Guide, Multi-Device System, Stream and Event Behavior); a kernel launch
// may not, hence the copy.
//
// Timeline:
//   B = cuCtxCreate(dev 0): module, stream sB (non-blocking), buffer; A = cuCtxCreate(dev 0)
//   (A current) cuMemcpyHtoDAsync(bufB, host, sB)   -> first op of sB, marker slab for B
//   cuStreamSynchronize(sB)                         -> must be CUDA_SUCCESS
//   cuCtxSetCurrent(B)
//   launch_in_context(ptx_fill, sB)                 -> good
//   launch_in_context(ptx_scatter, sB, 0x10)        -> CULPRIT (700 in context B)
//   cuStreamSynchronize(sB)                         -> REPORTS CUDA_ERROR_ILLEGAL_ADDRESS
//
// Expected: "sample-error: CUDA_ERROR_ILLEGAL_ADDRESS at cuStreamSynchronize(sb) ...", exit 1.
#include <cstdio>
#include <cuda.h>

#include "check.h"

#define PTX_WITH_CONTEXT_HELPERS
#include "driver_ptx.cuh"

int main() {
    const int n = 1024;
    static int host[n];
    CUdevice dev;
    CUcontext a, b;
    CUmodule mod_b;
    CUfunction fill, scatter;
    CUstream sb;
    CUdeviceptr buf_b;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(create_context(&b, dev));
    CU_CHECK(cuModuleLoadData(&mod_b, kPtx));
    CU_CHECK(cuModuleGetFunction(&fill, mod_b, "ptx_fill"));
    CU_CHECK(cuModuleGetFunction(&scatter, mod_b, "ptx_scatter"));
    CU_CHECK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    CU_CHECK(cuMemAlloc(&buf_b, n * sizeof(int)));
    CU_CHECK(create_context(&a, dev));  // pushes A: current from here on
    // The first op on B's stream, issued while A is current.
    CU_CHECK(cuMemcpyHtoDAsync(buf_b, host, n * sizeof(int), sb));
    CUresult clean = cuStreamSynchronize(sb);
    if (clean != CUDA_SUCCESS) {
        const char* name = "?";
        cuGetErrorName(clean, &name);
        fprintf(stderr, "sample-error: %s at the clean cuStreamSynchronize(sb) (not the culprit)\n",
                name);
        return 2;
    }
    CU_CHECK(cuCtxSetCurrent(b));  // B current from here on
    CU_CHECK(launch_in_context(fill, sb, buf_b, n));
    // BUG: the output handle of the second pass was never filled in.
    CU_CHECK(launch_in_context(scatter, sb, CUdeviceptr(0x10), n));
    CU_CHECK(cuStreamSynchronize(sb));
    printf("unexpected: no error\n");
    (void)a;
    return 0;
}
