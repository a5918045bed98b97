/* A library that reaches the driver through its own dependencies: linked with -lcuda and with a
 * CUDA runtime (fake_cudart.c), loaded by life.c with RTLD_LOCAL (like a Python extension module)
 * or RTLD_DEEPBIND. plugin_run() looks driver functions up with dlsym(RTLD_DEFAULT) and
 * cudaGetDriverEntryPoint, launches a faulting kernel through what it got and reads back with a
 * direct call. Prints key=value lines; returns 1 when the read-back returned the fault, 0 when it
 * succeeded, 3 on a setup failure. */
#define _GNU_SOURCE
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"

#include <dlfcn.h>
#include <stdio.h>

unsigned cudaGetDriverEntryPoint(const char *symbol, void **func, unsigned long long flags,
                                 unsigned *status);

__attribute__((noinline)) CUresult launch_bad_kernel(PFN_cuLaunchKernel launch, CUfunction f,
                                                     CUdeviceptr *buffer) {
    void *params[] = {buffer};
    return launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
}

int plugin_run(void) {
    /* RTLD_DEFAULT from here searches the global scope and this library's own scope. */
    printf("default_cuDeviceGet=%s\n", dlsym(RTLD_DEFAULT, "cuDeviceGet") ? "found" : "missing");
    printf("default_cuLaunchKernel=%s\n", dlsym(RTLD_DEFAULT, "cuLaunchKernel") ? "found" : "missing");
    printf("default_cuMemcpyBatchAsync=%s\n", dlsym(RTLD_DEFAULT, "cuMemcpyBatchAsync") ? "found" : "missing");
    PFN_cuLaunchKernel launch = NULL;
    unsigned status = 0;
    unsigned rc = cudaGetDriverEntryPoint("cuLaunchKernel", (void **)&launch, 0, &status);
    printf("entry_point_rc=%u\n", rc);
    if (rc != 0 || !launch) return 3;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction quick, oob;
    CUdeviceptr buffer;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) ||
        cuModuleLoadData(&mod, "// fake: quick\n// fake: oob fault=700 delay_us=1000\n") ||
        cuModuleGetFunction(&quick, mod, "quick") || cuModuleGetFunction(&oob, mod, "oob") ||
        cuMemAlloc_v2(&buffer, 64)) {
        printf("plugin_setup_failed\n");
        return 3;
    }
    void *params[] = {&buffer};
    printf("launch_rc=%u\n", launch(quick, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    printf("bad_launch_rc=%u\n", launch_bad_kernel(launch, oob, &buffer));
    int out[16];
    CUresult back = cuMemcpyDtoH_v2(out, buffer, sizeof out);
    printf("read_back_rc=%u\n", back);
    return back == 0 ? 0 : 1;
}
