/* cudablame_pause (the benchmarks' switch between recording and pass-through), linked with
 * -lcuda (the fake). The switch is looked up with dlsym(RTLD_DEFAULT, "cudablame_pause"), as
 * the benchmarks do; without the shim it is absent and every launch simply runs.
 *
 * Usage: pause count A B   on a created stream: A quick kernels launched while paused (then the
 *                          stream synchronized, still paused), B quick kernels while recording,
 *                          then the stream synchronized;
 *        pause fault A B   two created streams: a 20 ms kernel on stream b and A quick kernels
 *                          on each stream while paused, B quick kernels on each while
 *                          recording, then on stream b a kernel that faults (700) and 2 quick
 *                          kernels behind it; then cuCtxSynchronize;
 *        pause hidden A B  on a created stream: while paused the kernel that faults (700) and A
 *                          quick kernels, then B quick kernels recording; then cuCtxSynchronize:
 *                          the culprit is an op the rings never saw.
 * Prints pause_found=<0|1>, the switch's return values (pause_first= when pausing,
 * pause_again= pausing twice, resume_rc= resuming, resume_again= resuming twice), stream_a= and
 * stream_b= (fault), sync_rc=; exit status 0 when every call returned CUDA_SUCCESS (count), or
 * when only the synchronization returned the fault (fault). */
#define _GNU_SOURCE
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"
#include "check.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int (*pause_fn)(int);

/* Pauses (1) or resumes (0) when the switch exists; prints what it returned under `key`. */
static void set_paused(const char *key, int paused) {
    if (pause_fn) printf("%s=%d\n", key, pause_fn(paused));
}

static void quick_on(CUfunction f, CUstream s, long n) {
    for (long i = 0; i < n; i++)
        check("quick launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
}

/* The culprit's launch, in its own frame (the tests look for it in the launch stack). */
__attribute__((noinline)) static void launch_bad_kernel(CUfunction bad, CUstream s) {
    check("bad launch", cuLaunchKernel(bad, 8, 1, 1, 256, 1, 1, 0, s, NULL, NULL));
    __asm__ volatile("");
}

int main(int argc, char **argv) {
    if (argc < 4 ||
        (strcmp(argv[1], "count") && strcmp(argv[1], "fault") && strcmp(argv[1], "hidden"))) {
        fprintf(stderr, "usage: pause count A B | pause fault A B | pause hidden A B\n");
        return 2;
    }
    long a = atol(argv[2]), b = atol(argv[3]);
    pause_fn = (int (*)(int))dlsym(RTLD_DEFAULT, "cudablame_pause");
    printf("pause_found=%d\n", pause_fn != NULL);
    CUmodule mod;
    CUfunction quick, slow, bad;
    primary_context();
    /* The faulting kernel runs 50 ms: the launches that must come before its fault surfaces
     * (the quick kernels after it, recording resumed) fit in that even on a loaded machine
     * (with 1 ms, a quick launch of `hidden` got the fault once in a full test run). */
    check("module", cuModuleLoadData(&mod, "// fake: quick\n// fake: slow delay_us=20000\n"
                                           "// fake: oob_write fault=700 delay_us=50000\n"));
    check("quick", cuModuleGetFunction(&quick, mod, "quick"));
    check("slow", cuModuleGetFunction(&slow, mod, "slow"));
    check("bad", cuModuleGetFunction(&bad, mod, "oob_write"));
    if (!strcmp(argv[1], "count")) {
        CUstream s;
        check("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        set_paused("pause_first", 1);
        set_paused("pause_again", 1);
        quick_on(quick, s, a);
        check("paused sync", cuStreamSynchronize(s));
        set_paused("resume_rc", 0);
        set_paused("resume_again", 0);
        quick_on(quick, s, b);
        CUresult rc = cuStreamSynchronize(s);
        printf("sync_rc=%u\n", rc);
        return rc == CUDA_SUCCESS ? 0 : 1;
    }
    if (!strcmp(argv[1], "hidden")) {
        CUstream s;
        check("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        set_paused("pause_first", 1);
        launch_bad_kernel(bad, s);
        quick_on(quick, s, a);
        set_paused("resume_rc", 0);
        quick_on(quick, s, b);
        CUresult rc = cuCtxSynchronize();
        printf("sync_rc=%u\n", rc);
        return rc == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1;
    }
    CUstream sa, sb;
    check("stream a", cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    check("stream b", cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    printf("stream_a=%p\nstream_b=%p\n", (void *)sa, (void *)sb);
    set_paused("pause_first", 1);
    /* Still running when recording resumes: a paused op the rings never see. */
    check("slow launch", cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, sb, NULL, NULL));
    quick_on(quick, sa, a);
    quick_on(quick, sb, a);
    set_paused("resume_rc", 0);
    quick_on(quick, sa, b);
    quick_on(quick, sb, b);
    launch_bad_kernel(bad, sb);
    quick_on(quick, sb, 2);
    CUresult rc = cuCtxSynchronize();
    printf("sync_rc=%u\n", rc);
    return rc == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1;
}
