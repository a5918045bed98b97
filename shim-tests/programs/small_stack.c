/* CUDA calls on small stacks: `small_stack KIB MODE`. A thread created with a KIB KiB stack:
 *   plain     fills a 4 KiB buffer (no CUDA call);
 *   launch    its first CUDA calls (cuCtxSetCurrent, a launch of `fill`, a synchronize);
 *   fault     the same with `bad`, which faults (700): the sticky error comes back to that
 *             thread's synchronize, so the report is made there;
 *   refused   a launch of `refused`, which the driver refuses by itself (701, not sticky);
 *   capture   a stream captured into a graph there (begin, a launch of `fill`, end);
 *   sync      the main thread launches `bad`, the thread only synchronizes: the sticky error
 *             comes back to it, so its stack holds only the report path (with SMALL_STACK_PAD,
 *             that path's headroom);
 * or, on the main thread:
 *   altstack  a launch of `bad`, then the synchronize from a SIGUSR1 handler running on a KIB KiB
 *             alternate signal stack (sigaltstack: outside the thread's stack bounds).
 * Prints `create_rc=N` (pthread_create's result; 0 for altstack) and `thread_rc=N` (the last
 * CUDA result, or 0 for plain). A preloaded library's thread-locals are carved out of every
 * thread's stack (static TLS), and its work on a call runs on the caller's stack: the program
 * must see the same results with and without it. SMALL_STACK_PAD=N in the environment: the
 * thread first uses N bytes of its stack (a headroom check). */
#define _GNU_SOURCE
#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"

static CUcontext ctx;
static CUfunction fill, bad, refused;
static const char *mode;
static int thread_rc = -1;

/* SMALL_STACK_PAD=N: the thread uses N bytes of its stack before its calls (headroom checks). */
static size_t pad_bytes;

/* plain: 4 KiB of the thread's stack used, in a frame of its own (not in `calls`, whose frame
 * the CUDA modes' headroom includes). */
__attribute__((noinline)) static int fill_buffer(void) {
    volatile char buf[4096];
    memset((char *)buf, 1, sizeof buf);
    return buf[100] == 1 ? 0 : 1;
}

__attribute__((noinline)) static void *calls(void *arg) {
    CUresult rc = CUDA_SUCCESS;
    if (!strcmp(mode, "plain")) {
        thread_rc = fill_buffer();
        return arg;
    }
    rc = cuCtxSetCurrent(ctx);
    if (!strcmp(mode, "sync")) {
        if (!rc) rc = cuCtxSynchronize();
    } else if (!strcmp(mode, "capture")) {
        CUstream s;
        CUgraph g;
        if (!rc) rc = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
        if (!rc) rc = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
        if (!rc) rc = cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
        if (!rc) rc = cuStreamEndCapture(s, &g);
    } else {
        CUfunction f = !strcmp(mode, "fault") ? bad : !strcmp(mode, "refused") ? refused : fill;
        if (!rc) rc = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        if (!rc) rc = cuCtxSynchronize();
    }
    thread_rc = (int)rc;
    return arg;
}

static void *body(void *arg) {
    char *pad = pad_bytes ? alloca(pad_bytes) : NULL;
    if (pad) memset(pad, 1, pad_bytes);
    __asm__ volatile("" : : "r"(pad) : "memory");
    void *r = calls(arg);
    __asm__ volatile("" : : "r"(pad) : "memory");
    return r;
}

static void sync_in_handler(int sig) {
    (void)sig;
    thread_rc = (int)cuCtxSynchronize();
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    size_t kib = (size_t)atol(argv[1]);
    mode = argv[2];
    if (getenv("SMALL_STACK_PAD")) pad_bytes = (size_t)atol(getenv("SMALL_STACK_PAD"));
    if (strcmp(mode, "plain")) {
        CUdevice dev;
        CUmodule mod;
        if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
            cuCtxSetCurrent(ctx) ||
            cuModuleLoadData(&mod, "// fake: fill\n// fake: bad fault=700 delay_us=1000\n"
                                   "// fake: refused launch_error=701\n") ||
            cuModuleGetFunction(&fill, mod, "fill") || cuModuleGetFunction(&bad, mod, "bad") ||
            cuModuleGetFunction(&refused, mod, "refused")) {
            printf("setup_failed=1\n");
            return 3;
        }
    }
    if (!strcmp(mode, "altstack")) {
        stack_t alt = {.ss_sp = malloc(kib * 1024), .ss_size = kib * 1024, .ss_flags = 0};
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = sync_in_handler;
        sa.sa_flags = SA_ONSTACK;
        if (sigaltstack(&alt, NULL) || sigaction(SIGUSR1, &sa, NULL) ||
            cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)) {
            printf("setup_failed=2\n");
            return 3;
        }
        raise(SIGUSR1);
        printf("create_rc=0\nthread_rc=%d\n", thread_rc);
        return 0;
    }
    if (!strcmp(mode, "sync") && cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)) {
        printf("setup_failed=3\n");
        return 3;
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
