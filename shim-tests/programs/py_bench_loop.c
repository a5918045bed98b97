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
 * With BENCH_POLLUTE_PAGES=P it also touches P other pages of data and calls into P other pages
 * of code (one cache line each) between two launches, evicting the TLBs as a framework's
 * megabytes of code and data do: the hook then pays a page walk for each page it touches.
 * launch_loop_paired does the same with cudablame paused and recording in turn (cudablame_pause,
 * batches in ABBA order): the hook's own cost in one process, whose speed drifts far less within
 * the run than between two processes of a shared machine.
 * Build: cc -O2 -shared -fPIC -o py_bench_loop.so py_bench_loop.c */
#include <stdlib.h>
#include <sys/mman.h>
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

/* What runs between two launches (untimed): the pollution asked for in the environment. */
struct pollution {
    size_t bytes;
    volatile char *junk;
    int code;
    size_t pages;
    volatile char *data_pages;
    char *code_pages; /* each page: one `ret` at a line that moves with the page */
};

/* Offset of the line touched in page k: varies, so the lines do not all share a cache set. */
static size_t line_in_page(size_t k) { return (k * 64) % 4096; }

static void page_pollution_init(struct pollution *p) {
    size_t len = p->pages * 4096;
    void *d = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *c = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c != MAP_FAILED) {
        for (size_t k = 0; k < p->pages; k++) ((char *)c)[k * 4096 + line_in_page(k)] = (char)0xc3;
    }
    if (d == MAP_FAILED || c == MAP_FAILED || mprotect(c, len, PROT_READ | PROT_EXEC) != 0) {
        /* No page pollution: none of it kept mapped. */
        if (d != MAP_FAILED) munmap(d, len);
        if (c != MAP_FAILED) munmap(c, len);
        p->pages = 0;
        return;
    }
    p->data_pages = d;
    p->code_pages = c;
}

static void page_pollution(const struct pollution *p) {
    for (size_t k = 0; k < p->pages; k++) {
        p->data_pages[k * 4096 + line_in_page(k)] = (char)k;
        ((void (*)(void))(p->code_pages + k * 4096 + line_in_page(k)))();
    }
}

static struct pollution pollution_from_env(void) {
    const char *kb = getenv("BENCH_POLLUTE_KB");
    const char *code = getenv("BENCH_POLLUTE_CODE");
    const char *pages = getenv("BENCH_POLLUTE_PAGES");
    struct pollution p = {kb ? (size_t)atol(kb) * 1024 : 0, 0, code && code[0] == '1',
                          pages ? (size_t)atol(pages) : 0, 0, 0};
    p.junk = p.bytes ? malloc(p.bytes) : 0;
    if (p.pages) page_pollution_init(&p);
    return p;
}

static void pollution_free(struct pollution *p) {
    free((void *)p->junk);
    if (p->pages) {
        munmap((void *)p->data_pages, p->pages * 4096);
        munmap(p->code_pages, p->pages * 4096);
    }
}

/* ns spent in `batch` launches, each after the pollution. */
static long long timed_batch(launch_fn launch, void *f, int batch, const struct pollution *p) {
    long long dt = 0;
    for (int i = 0; i < batch; i++) {
        for (size_t k = 0; k < p->bytes; k += 64) p->junk[k] = (char)k;
        if (p->code) code_pollution();
        page_pollution(p);
        long long t0 = now_ns();
        launch(f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0);
        dt += now_ns() - t0;
    }
    return dt;
}

double launch_loop(launch_fn launch, void *f, int n, int batch) {
    struct pollution p = pollution_from_env();
    long long best = -1;
    for (int done = 0; done < n; done += batch) {
        long long dt = timed_batch(launch, f, batch, &p);
        if (best < 0 || dt < best) best = dt;
    }
    pollution_free(&p);
    return (double)best / batch;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef int (*pause_fn)(int);

/* n launches in pairs of batches, one paused and one recording, in ABBA order (recording first
 * in even pairs, paused first in odd ones); out[0]: the median over the pairs of recording minus
 * paused ns per launch, out[1] and out[2]: the median ns per launch paused and recording.
 * Returns the number of pairs (at most 4096). Leaves cudablame recording. */
int launch_loop_paired(launch_fn launch, void *f, int n, int batch, pause_fn pause, double *out) {
    enum { MAX_PAIRS = 4096 };
    static double added[MAX_PAIRS], paused[MAX_PAIRS], recording[MAX_PAIRS];
    struct pollution p = pollution_from_env();
    int pairs = 0;
    for (int done = 0; done + 2 * batch <= n && pairs < MAX_PAIRS; done += 2 * batch, pairs++) {
        long long t[2]; /* [0] recording, [1] paused */
        for (int half = 0; half < 2; half++) {
            int is_paused = (pairs + half) % 2;
            pause(is_paused);
            t[is_paused] = timed_batch(launch, f, batch, &p);
        }
        recording[pairs] = (double)t[0] / batch;
        paused[pairs] = (double)t[1] / batch;
        added[pairs] = recording[pairs] - paused[pairs];
    }
    pause(0);
    pollution_free(&p);
    if (pairs == 0) return 0;
    out[0] = median(added, pairs);
    out[1] = median(paused, pairs);
    out[2] = median(recording, pairs);
    return pairs;
}
