/* A fault in one context, noticed from another context of the same device (linked with -lcuda,
 * the fake).
 *
 * Usage: event_context sync|query|alloc|ctxsync
 * Context A (created first): on a created stream, the kernel `bad` (faults with 700 after
 * 20 ms), then an event recorded behind it. Context B (created second, current from then on):
 * the kernel `slow` (2 s) on its legacy stream, its only op. Then, with B current, the program
 * waits for A's event: `cuEventSynchronize` (sync), or `cuEventQuery` until it stops returning
 * CUDA_ERROR_NOT_READY (query); or, 300 ms later, with B current, calls `cuMemAlloc` (alloc)
 * or `cuCtxSynchronize` (ctxsync). The call returns A's sticky error (700: a fault stops the whole
 * device, as `cuda-samples/cross_context.c` measured on the H200); the culprit is `bad`, never
 * `slow` of the current context B "exact".
 * Prints event_rc=N; exits 1 when the error came back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"

static void check(const char *what, CUresult rc) {
    if (rc != CUDA_SUCCESS) {
        printf("setup_failed=%s rc=%u\n", what, rc);
        exit(3);
    }
}

__attribute__((noinline)) void launch_bad_kernel(CUfunction f, CUstream s) {
    check("launch bad", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    __asm__ volatile("");
}

__attribute__((noinline)) void launch_slow_kernel(CUfunction f) {
    check("launch slow", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    __asm__ volatile("");
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "sync";
    const char *image = "// fake: bad fault=700 delay_us=20000\n// fake: slow delay_us=2000000\n";
    CUdevice dev;
    CUcontext a, b, popped;
    CUmodule mod_a, mod_b;
    CUfunction bad, slow;
    CUstream s;
    CUevent ev;
    check("cuInit", cuInit(0));
    check("cuDeviceGet", cuDeviceGet(&dev, 0));
    check("ctx a", cuCtxCreate(&a, 0, dev));
    check("load a", cuModuleLoadData(&mod_a, image));
    check("bad", cuModuleGetFunction(&bad, mod_a, "bad"));
    check("stream a", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    check("event a", cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    check("ctx b", cuCtxCreate(&b, 0, dev));
    check("load b", cuModuleLoadData(&mod_b, image));
    check("slow", cuModuleGetFunction(&slow, mod_b, "slow"));
    check("push a", cuCtxPushCurrent(a));
    launch_bad_kernel(bad, s);
    check("record", cuEventRecord(ev, s));
    check("pop a", cuCtxPopCurrent(&popped));
    launch_slow_kernel(slow);
    CUresult rc;
    if (!strcmp(mode, "query")) {
        while ((rc = cuEventQuery(ev)) == CUDA_ERROR_NOT_READY) usleep(1000);
    } else if (!strcmp(mode, "alloc")) {
        CUdeviceptr p;
        usleep(300000);
        rc = cuMemAlloc(&p, 256);
    } else if (!strcmp(mode, "ctxsync")) {
        usleep(300000);
        rc = cuCtxSynchronize();
    } else {
        rc = cuEventSynchronize(ev);
    }
    printf("event_rc=%u\n", rc);
    return rc == CUDA_SUCCESS ? 0 : 1;
}
