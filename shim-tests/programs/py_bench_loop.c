/* Launch loop for py_bench.py: called once through ctypes (the GIL released, the caller's Python
 * frames in place, as when PyTorch launches kernels under one Python op), it calls the launch
 * function it is given N times from C and returns the ns per launch of the fastest batch.
 * Build: cc -O2 -shared -fPIC -o py_bench_loop.so py_bench_loop.c */
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
    long long best = -1;
    for (int done = 0; done < n; done += batch) {
        long long t0 = now_ns();
        for (int i = 0; i < batch; i++) launch(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
        long long dt = now_ns() - t0;
        if (best < 0 || dt < best) best = dt;
    }
    return (double)best / batch;
}
