/* Launch loop for py_bench.py: called once through ctypes (the GIL released, the caller's Python
 * frames in place, as when PyTorch launches kernels under one Python op), it calls the launch
 * function it is given N times from C and returns the ns per launch of the fastest batch.
 * With BENCH_POLLUTE_KB=K in the environment, K KiB of other memory are written between two
 * launches (untimed), evicting the CPU caches the way a framework's work between launches
 * does: the hook then pays the cache misses it pays in PyTorch. With BENCH_POLLUTE_CODE=1 it
 * also runs 64 KiB of straight-line code between two launches (untimed), evicting the
 * instruction cache as the interpreter's and the framework's code does: under cachegrind the
 * hook's instruction misses per launch are then the distinct code lines it runs, not an
 * artifact of where the linker put them.
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

/* 64 KiB of code: 4096 volatile read-modify-writes of about 16 bytes each. */
#define R4(k) x = x * 3 + (k); x = x * 3 + (k) + 1; x = x * 3 + (k) + 2; x = x * 3 + (k) + 3;
#define R16(k) R4(k) R4(k + 4) R4(k + 8) R4(k + 12)
#define R256(k) R16(k) R16(k + 16) R16(k + 32) R16(k + 48) R16(k + 64) R16(k + 80) R16(k + 96) \
    R16(k + 112) R16(k + 128) R16(k + 144) R16(k + 160) R16(k + 176) R16(k + 192) R16(k + 208) \
    R16(k + 224) R16(k + 240)
static volatile long x;
__attribute__((noinline)) static void code_pollution(void) {
    R256(0) R256(256) R256(512) R256(768) R256(1024) R256(1280) R256(1536) R256(1792)
    R256(2048) R256(2304) R256(2560) R256(2816) R256(3072) R256(3328) R256(3584) R256(3840)
}

double launch_loop(launch_fn launch, void *f, int n, int batch) {
    const char *kb = getenv("BENCH_POLLUTE_KB");
    size_t pollute = kb ? (size_t)atol(kb) * 1024 : 0;
    volatile char *junk = pollute ? malloc(pollute) : 0;
    const char *code = getenv("BENCH_POLLUTE_CODE");
    int pollute_code = code && code[0] == '1';
    long long best = -1;
    for (int done = 0; done < n; done += batch) {
        long long dt = 0;
        for (int i = 0; i < batch; i++) {
            for (size_t k = 0; k < pollute; k += 64) junk[k] = (char)k;
            if (pollute_code) code_pollution();
            long long t0 = now_ns();
            launch(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
            dt += now_ns() - t0;
        }
        if (best < 0 || dt < best) best = dt;
    }
    free((void *)junk);
    return (double)best / batch;
}
