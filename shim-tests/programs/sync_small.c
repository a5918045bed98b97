/* sync_small KIB PAD: the sticky-error path on a small stack (robust.rs,
 * the_sticky_error_path_keeps_its_stack_headroom). The main thread launches `bad` (it faults
 * with 700 after 300 ms); then a thread with a KIB KiB stack first uses PAD bytes of it and
 * calls cuCtxSynchronize, which the sticky error comes back to: cudablame's report path then
 * runs on that thread's remaining stack. Prints create_rc (pthread_create) and thread_rc (the
 * synchronize's result); exit 0, or 3 when the setup fails. */
#include <alloca.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_min.h"

static CUcontext ctx;
static size_t pad;
static int thread_rc = -1;

__attribute__((noinline)) static void *calls(void *arg) {
    CUresult rc = cuCtxSetCurrent(ctx);
    if (!rc) rc = cuCtxSynchronize();
    thread_rc = (int)rc;
    return arg;
}

static void *body(void *arg) {
    char *p = pad ? alloca(pad) : NULL;
    if (p) memset(p, 1, pad);
    __asm__ volatile("" : : "r"(p) : "memory"); /* the pad stays below this frame */
    void *r = calls(arg);
    __asm__ volatile("" : : "r"(p) : "memory");
    return r;
}

int main(int argc, char **argv) {
    if (argc < 3) return 3;
    size_t kib = (size_t)atol(argv[1]);
    pad = (size_t)atol(argv[2]);
    CUdevice dev;
    CUmodule mod;
    CUfunction bad;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) ||
        cuModuleLoadData(&mod, "// fake: bad fault=700 delay_us=300000\n") ||
        cuModuleGetFunction(&bad, mod, "bad") ||
        cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL))
        return 3;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kib * 1024);
    pthread_t t;
    int rc = pthread_create(&t, &attr, body, NULL);
    printf("create_rc=%d\n", rc);
    if (rc == 0) pthread_join(t, NULL);
    printf("thread_rc=%d\n", thread_rc);
    return 0;
}
