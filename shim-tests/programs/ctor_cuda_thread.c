/* Loads the library of ctor_cuda_thread_lib.c (argv[1]) with dlopen after one launch of `fill`
 * on the legacy stream; its constructor joins a thread that launches `fill` itself. Prints the
 * thread's result: `ctor_rc=0`. Linked with -lcuda (the fake) and -rdynamic (the library reads
 * `shared_ctx` and `fill_fn` from here). */
#include <dlfcn.h>
#include <stdio.h>
#include "cuda_min.h"

CUcontext shared_ctx;
CUfunction fill_fn;

int main(int argc, char **argv) {
    CUdevice dev;
    CUmodule mod;
    if (argc < 2) return 2;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&shared_ctx, dev) ||
        cuCtxSetCurrent(shared_ctx) || cuModuleLoadData(&mod, "// fake: fill\n") ||
        cuModuleGetFunction(&fill_fn, mod, "fill") ||
        cuLaunchKernel(fill_fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) || cuCtxSynchronize()) {
        printf("setup_failed=1\n");
        return 3;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen_failed=%s\n", dlerror()); return 4; }
    int *rc = (int *)dlsym(h, "ctor_rc");
    printf("ctor_rc=%d\n", rc ? *rc : -9);
    return 0;
}
