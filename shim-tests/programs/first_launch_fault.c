/* A kernel whose first launch faults at once: its handle was looked up while cudablame was
 * paused (so cudablame saw no lookup, as with handles a CUDA runtime looks up through paths it
 * does not record), and it faults inside its launch call (inline=1). cuCtxSynchronize then
 * returns the fault. Run with FAKE_CUDA_NAMELESS=after_fault (the driver names nothing after
 * the fault): the report can name the kernel only if cudablame asked the driver before the
 * launch's real call (found by review in the sixteenth session: the name was asked after it).
 * Prints sync_rc=; exit status 0 when the synchronization returned 700. */
#define _GNU_SOURCE
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"
#include "check.h"

#include <dlfcn.h>
#include <stdio.h>

/* The culprit's launch, in its own frame. */
__attribute__((noinline)) static void launch_bad_kernel(CUfunction bad, CUstream s) {
    check("bad launch", cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    __asm__ volatile("");
}

int main(void) {
    int (*pause_fn)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudablame_pause");
    CUmodule mod;
    CUfunction quick, bad;
    CUstream s;
    primary_context();
    check("module", cuModuleLoadData(&mod, "// fake: quick\n// fake: bad_kernel fault=700 inline=1\n"));
    check("quick", cuModuleGetFunction(&quick, mod, "quick"));
    check("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (pause_fn) pause_fn(1);
    check("bad", cuModuleGetFunction(&bad, mod, "bad_kernel"));
    if (pause_fn) pause_fn(0);
    check("quick launch", cuLaunchKernel(quick, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    check("stream sync", cuStreamSynchronize(s));
    launch_bad_kernel(bad, s);
    CUresult rc = cuCtxSynchronize();
    printf("sync_rc=%d\n", (int)rc);
    return rc == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1;
}
