/* Launch loop for py_bench.py: called once through ctypes (the GIL released, the caller's Python
 * frames in place, as when PyTorch launches kernels under one Python op), it calls the launch
 * function it is given N times from C and returns the ns per launch of the fastest batch.
 * With BENCH_POLLUTE_KB=K in the environment, K KiB of other memory are written between two
 * launches (untimed), evicting the CPU caches the way a framework's work between launches
 * does: the hook then pays the cache misses it pays in PyTorch.
 * Build: cc -O2 -shared -fPIC -o py_bench_loop.so py_bench_loop.c */
#include <stdlib.h>
#include <time.h>

typedef unsigned int CUresult;
typedef CUresult (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, void *, void **, void **);

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double launch_loop(launch_fn launch, void *f, int n, int batch) {
    const char *kb = getenv("BENCH_POLLUTE_KB");
    size_t pollute = kb ? (size_t)atol(kb) * 1024 : 0;
    volatile char *junk = pollute ? malloc(pollute) : 0;
    long long best = -1;
    for (int done = 0; done < n; done += batch) {
        long long dt = 0;
        for (int i = 0; i < batch; i++) {
            for (size_t k = 0; k < pollute; k += 64) junk[k] = (char)k;
            long long t0 = now_ns();
            launch(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
            dt += now_ns() - t0;
        }
        if (best < 0 || dt < best) best = dt;
    }
    free((void *)junk);
    return (double)best / batch;
}
