/* A thread created with a small stack (`small_stack KIB plain|launch|fault`): `plain` fills a
 * 4 KiB buffer; `launch` makes its first CUDA calls there (cuCtxSetCurrent, a launch of `fill`, a
 * synchronize); `fault` the same with `bad`, which faults (700): the sticky error comes back to
 * that thread's synchronize, so the report is made there. Prints `create_rc=N` (pthread_create's result) and `thread_rc=N` (0: the thread
 * ran and its calls succeeded). A preloaded library's thread-locals are carved out of every
 * thread's stack (static TLS): the program must see the same results with and without it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"

static CUcontext ctx;
static CUfunction fill;
static int fault_mode;
static int launch_mode;
static int thread_rc = -1;

static void *body(void *arg) {
    if (launch_mode) {
        CUresult rc = cuCtxSetCurrent(ctx);
        if (!rc) rc = cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);  /* fill or bad */
        if (!rc) rc = cuCtxSynchronize();
        thread_rc = (int)rc;
    } else {
        volatile char buf[4096];
        memset((char *)buf, 1, sizeof buf);
        thread_rc = buf[100] == 1 ? 0 : 1;
    }
    return arg;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    size_t kib = (size_t)atol(argv[1]);
    fault_mode = strcmp(argv[2], "fault") == 0;
    launch_mode = fault_mode || strcmp(argv[2], "launch") == 0;
    if (launch_mode) {
        CUdevice dev;
        CUmodule mod;
        if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
            cuCtxSetCurrent(ctx) ||
            cuModuleLoadData(&mod, "// fake: fill\n// fake: bad fault=700 delay_us=1000\n") ||
            cuModuleGetFunction(&fill, mod, fault_mode ? "bad" : "fill")) {
            printf("setup_failed=1\n");
            return 3;
        }
    }
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
