/* Load: THREADS threads, each with STREAMS streams of its own, each launching LAUNCHES kernels of
 * zero delay round-robin over its streams (synchronizing its streams every 1024 launches, as a
 * training loop would), then one faulting kernel on one stream, reported by that stream's
 * synchronization.
 *
 * Usage: load THREADS STREAMS LAUNCHES   (LAUNCHES per thread, a multiple of STREAMS)
 * Prints: rss_before_kb= (after setup), rss_half_kb= (every thread half done), rss_end_kb=,
 * hwm_kb= (peak), launches=, seconds=, failed_launches=, culprit_stream=, expected_seq=,
 * sync_rc= (the fault's). Exit status 0 when the fault was returned, 1 otherwise. */
#define _GNU_SOURCE
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int threads, streams_per_thread;
static long launches;
static CUcontext ctx;
static CUfunction quick, oob;
static CUstream *streams; /* threads x streams_per_thread */
static pthread_barrier_t half, resume;
static long failed;
static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;

static long rss_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) v = atol(line + n);
    if (f) fclose(f);
    return v;
}

static void *body(void *arg) {
    long t = (long)arg;
    CUstream *mine = streams + t * streams_per_thread;
    long bad = 0;
    check("thread context", cuCtxSetCurrent(ctx));
    for (long i = 0; i < launches; i++) {
        if (i == launches / 2) {
            pthread_barrier_wait(&half);
            pthread_barrier_wait(&resume);
        }
        CUstream s = mine[i % streams_per_thread];
        if (cuLaunchKernel(quick, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS) bad++;
        if (i % 1024 == 1023)
            for (int k = 0; k < streams_per_thread; k++)
                if (cuStreamSynchronize(mine[k]) != CUDA_SUCCESS) bad++;
    }
    for (int k = 0; k < streams_per_thread; k++)
        if (cuStreamSynchronize(mine[k]) != CUDA_SUCCESS) bad++;
    pthread_mutex_lock(&failed_lock);
    failed += bad;
    pthread_mutex_unlock(&failed_lock);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: load THREADS STREAMS LAUNCHES_PER_THREAD\n");
        return 2;
    }
    threads = atoi(argv[1]);
    streams_per_thread = atoi(argv[2]);
    launches = atol(argv[3]);
    setvbuf(stdout, NULL, _IONBF, 0);
    CUmodule mod;
    ctx = primary_context();
    check("module", cuModuleLoadData(&mod, "// fake: quick\n// fake: oob fault=700\n"));
    check("quick", cuModuleGetFunction(&quick, mod, "quick"));
    check("oob", cuModuleGetFunction(&oob, mod, "oob"));
    streams = calloc((size_t)threads * streams_per_thread, sizeof *streams);
    for (int i = 0; i < threads * streams_per_thread; i++)
        check("stream", cuStreamCreate(&streams[i], CU_STREAM_NON_BLOCKING));
    pthread_barrier_init(&half, NULL, threads + 1);
    pthread_barrier_init(&resume, NULL, threads + 1);
    printf("rss_before_kb=%ld\n", rss_kb("VmRSS:"));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t *tids = calloc(threads, sizeof *tids);
    for (long t = 0; t < threads; t++) pthread_create(&tids[t], NULL, body, (void *)t);
    pthread_barrier_wait(&half);
    printf("rss_half_kb=%ld\n", rss_kb("VmRSS:"));
    pthread_barrier_wait(&resume);
    for (int t = 0; t < threads; t++) pthread_join(tids[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("rss_end_kb=%ld\nhwm_kb=%ld\n", rss_kb("VmRSS:"), rss_kb("VmHWM:"));
    printf("launches=%ld\nseconds=%.3f\nfailed_launches=%ld\n", (long)threads * launches,
           (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, failed);
    /* The fault at the end: on the last thread's last stream, after its launches/streams ops. */
    CUstream target = streams[threads * streams_per_thread - 1];
    printf("culprit_stream=%p\nexpected_seq=%ld\n", (void *)target, launches / streams_per_thread + 1);
    check("oob launch", cuLaunchKernel(oob, 1, 1, 1, 32, 1, 1, 0, target, NULL, NULL));
    CUresult rc = cuStreamSynchronize(target);
    printf("sync_rc=%u\n", rc);
    return rc == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1;
}
