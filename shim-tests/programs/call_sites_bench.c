/* One launch line reached from three call sites at one stack depth (a warm-up loop's two and the
 * timed loop's one; the compiler folds the two identical `path_*` functions into one), as in
 * cuda-samples/bench/launch_loop.cu's paired mode: the host ns per launch of the timed loop, on
 * the simulated driver's inline kernel (run inside the launch call: no worker thread). A
 * benchmark, not a test (README, Performance, twenty-second session):
 *   cc -O2 -o /tmp/call_sites_bench shim-tests/programs/call_sites_bench.c -L/tmp/sim -l:libcuda.so.1
 *   LD_LIBRARY_PATH=/tmp/sim LD_PRELOAD=target/release/libcudablame.so CUDABLAME_REPORT=off \
 *     CUDABLAME_STATS=on taskset -c 1 /tmp/call_sites_bench 200000
 * with /tmp/sim/libcuda.so.1 the simulated driver (README, Tests). Prints launch_ns=<ns>. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int CUresult;
typedef void *CUfunction;
typedef void *CUmodule;
typedef void *CUcontext;
typedef int CUdevice;
CUresult cuInit(unsigned);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuCtxCreate_v2(CUcontext *, unsigned, CUdevice);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);
CUresult cuCtxSynchronize(void);

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

__attribute__((noinline)) static CUresult launch_line(CUfunction f) {
    CUresult rc = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
    __asm__ volatile("");
    return rc;
}
__attribute__((noinline)) static CUresult path_a(CUfunction f) {
    CUresult rc = launch_line(f);
    __asm__ volatile("");
    return rc;
}
__attribute__((noinline)) static CUresult path_b(CUfunction f) {
    CUresult rc = launch_line(f);
    __asm__ volatile("");
    return rc;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    CUdevice d;
    CUcontext c;
    CUmodule m;
    CUfunction f;
    const char *image = "// fake: inline inline=1\n.entry inline(\n";
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuCtxCreate_v2(&c, 0, d) ||
        cuModuleLoadData(&m, image) || cuModuleGetFunction(&f, m, "inline")) {
        puts("setup failed");
        return 1;
    }
    for (int i = 0; i < 2000; i++) {
        path_a(f);
        path_b(f);
    }
    long long t0 = now_ns();
    for (int i = 0; i < n; i++) {
        if (i & 1)
            path_b(f);
        else
            path_a(f);
    }
    long long t1 = now_ns();
    cuCtxSynchronize();
    printf("launch_ns=%.1f\n", (double)(t1 - t0) / n);
    return 0;
}
