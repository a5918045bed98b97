/* A fork while another thread builds cudablame's report: the main thread launches a faulting
 * kernel and waits 20 ms (the fault, 100 us in, has surely happened: the child below sees it
 * whatever the timing), then thread A copies back (cudablame then reports, symbolizing for tens
 * of ms); the main thread forks 2 ms later, and the child queries the stream, meeting the
 * sticky error, so cudablame reports in the child too. The backtrace crate's lock, held by
 * thread A at the fork, is never released in the child: the child must not wait for it (found
 * by a break-it helper, twentieth session).
 * Prints child_query=, child_status=; exit status 0 when the child ended normally. */
#define _GNU_SOURCE
#include "cuda_min.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *IMAGE = "// fake: bad fault=700 delay_us=100\n.entry bad(\n";
static CUcontext ctx;
static CUfunction bad;
static CUdeviceptr buf;

static void *copying_back(void *unused) {
    (void)unused;
    int x;
    cuCtxSetCurrent(ctx);
    printf("thread_copy=%d\n", (int)cuMemcpyDtoH(&x, buf, sizeof x));
    fflush(stdout);
    return NULL;
}

int main(void) {
    CUdevice dev;
    CUmodule mod;
    cuInit(0);
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    cuModuleLoadData(&mod, IMAGE);
    cuModuleGetFunction(&bad, mod, "bad");
    cuMemAlloc(&buf, 64);
    cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    usleep(20000);
    pthread_t t;
    pthread_create(&t, NULL, copying_back, NULL);
    usleep(2000);
    pid_t child = fork();
    if (child == 0) {
        printf("child_query=%d\n", (int)cuStreamQuery(NULL));
        fflush(stdout);
        exit(0);
    }
    int status = 1;
    waitpid(child, &status, 0);
    pthread_join(t, NULL);
    printf("child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
