/* Loads the library of ctor_cuda_thread_lib.c (argv[1]) with dlopen after one launch of `fill`
 * on the legacy stream; its constructor joins a thread that launches `fill` itself. Prints the
 * thread's result: `ctor_rc=0`. Linked with -lcuda (the fake) and -rdynamic (the library reads
 * `shared_ctx` and `fill_fn` from here).
 *
 * `ctor_cuda_thread LIB contended`: first another thread launches `slow` on the same (legacy)
 * stream, a kernel the fake driver runs inside the launch call for 1 s (`inline=1`), and the
 * dlopen comes 200 ms later: the constructor's thread launches while that launch is still in
 * the driver, so it has to wait for the stream (cudablame holds the stream's ring lock around the
 * real call). Then prints `slow_rc=0` too. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"

CUcontext shared_ctx;
CUfunction fill_fn;
static CUfunction slow_fn;
static int slow_rc = -1;

static void *launch_slow(void *arg) {
    CUresult rc = cuCtxSetCurrent(shared_ctx);
    if (!rc) rc = cuLaunchKernel(slow_fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    slow_rc = (int)rc;
    return arg;
}

int main(int argc, char **argv) {
    CUdevice dev;
    CUmodule mod;
    int contended = argc > 2 && strcmp(argv[2], "contended") == 0;
    pthread_t slow_thread;
    if (argc < 2) return 2;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&shared_ctx, dev) ||
        cuCtxSetCurrent(shared_ctx) ||
        cuModuleLoadData(&mod, "// fake: fill\n// fake: slow inline=1 delay_us=1000000\n") ||
        cuModuleGetFunction(&fill_fn, mod, "fill") || cuModuleGetFunction(&slow_fn, mod, "slow") ||
        cuLaunchKernel(fill_fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) || cuCtxSynchronize()) {
        printf("setup_failed=1\n");
        return 3;
    }
    if (contended) {
        if (pthread_create(&slow_thread, NULL, launch_slow, NULL)) return 5;
        usleep(200 * 1000);
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen_failed=%s\n", dlerror()); return 4; }
    int *rc = (int *)dlsym(h, "ctor_rc");
    printf("ctor_rc=%d\n", rc ? *rc : -9);
    if (contended) {
        pthread_join(slow_thread, NULL);
        printf("slow_rc=%d\n", slow_rc);
    }
    return 0;
}
