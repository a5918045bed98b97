/* A library whose constructor (inside dlopen, glibc's loader lock held) starts a thread that
 * launches a kernel and synchronizes, and joins it: GPU work at load time on a helper thread. */
#include <pthread.h>
#include "cuda_min.h"

extern CUcontext shared_ctx;
extern CUfunction fill_fn;

int ctor_rc = -1;

static void *worker(void *arg) {
    CUresult rc = cuCtxSetCurrent(shared_ctx);
    if (!rc) rc = cuLaunchKernel(fill_fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    if (!rc) rc = cuCtxSynchronize();
    ctor_rc = (int)rc;
    return arg;
}

__attribute__((constructor)) static void launch_on_a_thread_and_join(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) == 0) pthread_join(t, NULL);
}
