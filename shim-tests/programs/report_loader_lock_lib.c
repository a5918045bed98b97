/* The library of report_loader_lock.c: its constructor (inside dlopen, glibc's loader lock
 * held) tells the program it runs, waits 300 ms (the program's cuCtxSynchronize gets the sticky
 * error and cudablame starts its report meanwhile), then gets the sticky error itself. */
#include <unistd.h>
#include "cuda_min.h"

extern volatile int ctor_entered;
extern CUcontext loader_ctx;

int ctor_rc = -1;

__attribute__((constructor)) static void sync_inside_dlopen(void) {
    cuCtxSetCurrent(loader_ctx);
    ctor_entered = 1;
    usleep(300000);
    ctor_rc = (int)cuCtxSynchronize();
}
