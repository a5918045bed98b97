/* Marker policy: launches whose spacing the test controls, linked with -lcuda (the fake).
 *
 * Usage: markers loop N      a slow kernel (200 ms) blocks a created stream, then N quick kernels
 *                            are launched behind it back to back (the host far ahead of the
 *                            "GPU"), then the stream is synchronized;
 *        markers gaps N US   N quick kernels on a created stream, US microseconds of host time
 *                            (nanosleep) between launches, then the stream is synchronized;
 *        markers inline N    N kernels the fake driver runs inside the launch call (`inline=1`),
 *                            then one that faults (700) the same way; prints the stream's
 *                            cuStreamQuery right after each (inline_query_rc=, fault_query_rc=).
 * Prints ops=<ops recorded on the stream> sync_rc=<rc>; exit status 0 when everything returned
 * CUDA_SUCCESS. Run with CUDABLAME_STATS=on, the `cudablame stats:` line says how many ops got a
 * progress marker. */
#define _GNU_SOURCE
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "loop") && strcmp(argv[1], "gaps") && strcmp(argv[1], "inline")) ||
        (!strcmp(argv[1], "gaps") && argc < 4)) {
        fprintf(stderr, "usage: markers loop N | markers gaps N US | markers inline N\n");
        return 2;
    }
    int loop = !strcmp(argv[1], "loop");
    long n = atol(argv[2]);
    long gap_us = strcmp(argv[1], "gaps") ? 0 : atol(argv[3]);
    CUmodule mod;
    CUfunction quick, slow;
    CUstream s;
    primary_context();
    check("module", cuModuleLoadData(&mod, "// fake: quick\n// fake: slow delay_us=200000\n"
                                           "// fake: tiny inline=1\n"
                                           "// fake: bad_inline inline=1 fault=700\n"));
    check("quick", cuModuleGetFunction(&quick, mod, "quick"));
    check("slow", cuModuleGetFunction(&slow, mod, "slow"));
    check("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (!strcmp(argv[1], "inline")) {
        CUfunction tiny, bad;
        check("tiny", cuModuleGetFunction(&tiny, mod, "tiny"));
        check("bad_inline", cuModuleGetFunction(&bad, mod, "bad_inline"));
        for (long i = 0; i < n; i++)
            check("tiny launch", cuLaunchKernel(tiny, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        printf("inline_query_rc=%u\n", cuStreamQuery(s));
        printf("fault_launch_rc=%u\n", cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        printf("fault_query_rc=%u\n", cuStreamQuery(s));
        printf("sync_rc=%u\n", cuStreamSynchronize(s));
        return 0;
    }
    long ops = 0;
    if (loop) {
        check("slow launch", cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
        ops++;
    }
    struct timespec pause = {gap_us / 1000000, (gap_us % 1000000) * 1000};
    for (long i = 0; i < n; i++) {
        if (gap_us && i) nanosleep(&pause, NULL);
        check("quick launch", cuLaunchKernel(quick, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        ops++;
    }
    CUresult rc = cuStreamSynchronize(s);
    printf("ops=%ld\nsync_rc=%u\n", ops, rc);
    return rc == CUDA_SUCCESS ? 0 : 1;
}
