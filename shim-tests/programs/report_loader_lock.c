/* A report that needs glibc's loader lock while a thread waiting for it holds that lock.
 *
 * Usage: report_loader_lock LIB (linked with -lcuda, the fake, and -rdynamic: the library of
 * report_loader_lock_lib.c reads `ctor_entered` and `loader_ctx` from here).
 *
 * The main thread launches fill (#1, synchronized) and bad_kernel (#2, faults with 700 at once) on the legacy stream, then
 * starts a loader thread that dlopens LIB. Its constructor runs inside dlopen with the loader
 * lock held: it sets `ctor_entered`, sleeps 300 ms, and calls cuCtxSynchronize, which returns
 * 700. Meanwhile the main thread, once `ctor_entered` is set, calls cuCtxSynchronize: 700, and
 * cudablame writes its report on this thread. Symbolizing the report's stacks calls dladdr,
 * which waits for the loader lock; the constructor's cuCtxSynchronize, having got the sticky
 * error too, waited for that report to be written: each waited for the other, forever.
 * Without cudablame: main_rc=700, ctor_rc=700, exit 0. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "cuda_min.h"
#include "check.h"

static const char *MODULE = "// fake: fill\n// fake: bad_kernel fault=700\n";

volatile int ctor_entered = 0;
CUcontext loader_ctx;

static void *loader(void *path) {
    void *h = dlopen((const char *)path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen_failed=%s\n", dlerror());
        return NULL;
    }
    int *rc = (int *)dlsym(h, "ctor_rc");
    return rc;
}

__attribute__((noinline)) void launch_faulting(CUfunction f) {
    check("launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
}

int main(int argc, char **argv) {
    CUdevice dev;
    CUmodule mod;
    CUfunction fill, bad_kernel;
    pthread_t t;
    if (argc < 2) return 2;
    check("cuInit", cuInit(0));
    check("cuDeviceGet", cuDeviceGet(&dev, 0));
    check("retain", cuDevicePrimaryCtxRetain(&loader_ctx, dev));
    check("set", cuCtxSetCurrent(loader_ctx));
    check("load", cuModuleLoadData(&mod, MODULE));
    check("get", cuModuleGetFunction(&bad_kernel, mod, "bad_kernel"));
    check("get fill", cuModuleGetFunction(&fill, mod, "fill"));
    /* The fake driver's stream worker must be running before the loader lock is taken (a thread
     * starting up registers its TLS destructors under that lock): one healthy op first. */
    check("fill", cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    check("sync", cuCtxSynchronize());
    launch_faulting(bad_kernel);
    usleep(100000); /* the fault has happened: every later call returns 700 */
    if (pthread_create(&t, NULL, loader, argv[1]) != 0) return 4;
    while (!ctor_entered) usleep(1000);
    CUresult rc = cuCtxSynchronize();
    void *ctor_rc = NULL;
    pthread_join(t, &ctor_rc);
    printf("main_rc=%u\n", rc);
    printf("ctor_rc=%d\n", ctor_rc ? *(int *)ctor_rc : -1);
    return 0;
}
