// marker_kinds.cu: what each way of writing a progress marker costs the launching thread and the
// GPU, measured side by side (issue 21: the budget's markers cost a PyTorch GPT step's launching
// thread about 10.5 us each on an H100 host, a warm loop's 1.7 to 3.1).
//
// Kinds: `write` (cuStreamWriteValue64 into mapped pinned host memory, today's marker),
// `kernel` (cuLaunchKernel of a one-thread PTX kernel storing the value there), `memset`
// (cuMemsetD32Async of the slot), `event` (cuEventRecord, timing disabled: a reference for the
// driver's cheapest stream call, not a marker that survives a sticky error), `none`.
//
// host: each pass launches OPS tiny kernels on one non-blocking stream, a marker after every
// 32nd; between launches it either does nothing (warm) or rewrites THRASH bytes of its own
// memory (cold: a framework's host work between launches evicts the driver's cache lines).
// Prints, per kind and regime, the median and mean host ns of the marker call alone and the
// mean ns per op of the whole pass. Kinds rotate within each of ROUNDS rounds.
//
// gpu: 400 tiny kernels queued behind a 20 ms spin kernel, a marker after each (or none), GPU
// time per op from events around them.
//
// sticky: in a child process per trial, kernel A, marker(1), a kernel that stores to an
// unmapped address, marker(2); after the error the slot must read 1 (kinds write and kernel).
//
// Build: nvcc -O2 -o marker_kinds marker_kinds.cu -lcuda
// Run:   ./marker_kinds [rounds]
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <algorithm>
#include <vector>

#define CK(x)                                                                 \
    do {                                                                      \
        CUresult r_ = (x);                                                    \
        if (r_ != CUDA_SUCCESS) {                                             \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, r_); \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static const char kPtx[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry mk_tiny(.param .u64 p)\n{\n ret;\n}\n"
    ".visible .entry mk_mark(.param .u64 slot, .param .u64 value)\n{\n"
    " .reg .b64 %rd<3>;\n"
    " ld.param.u64 %rd1, [slot];\n ld.param.u64 %rd2, [value];\n"
    " st.volatile.global.u64 [%rd1], %rd2;\n ret;\n}\n"
    ".visible .entry mk_bad(.param .u64 p)\n{\n"
    " .reg .b64 %rd<3>;\n mov.u64 %rd1, 0x10;\n mov.u64 %rd2, 7;\n"
    " st.global.u64 [%rd1], %rd2;\n ret;\n}\n"
    ".visible .entry mk_spin(.param .u64 cycles)\n{\n"
    " .reg .pred %p<2>;\n .reg .b64 %rd<5>;\n ld.param.u64 %rd1, [cycles];\n"
    " mov.u64 %rd2, %clock64;\n$L:\n mov.u64 %rd3, %clock64;\n sub.s64 %rd4, %rd3, %rd2;\n"
    " setp.lt.s64 %p1, %rd4, %rd1;\n @%p1 bra $L;\n ret;\n}\n";

enum Kind { NONE, WRITE, KERNEL, MEMSET, EVENT, NKINDS };
static const char* kNames[] = {"none", "write", "kernel", "memset", "event"};

static CUfunction fTiny, fMark, fBad, fSpin;
static CUdeviceptr slotDev;
static volatile unsigned long long* slotHost;
static CUevent markEvent;

static long long nowNs() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void setup() {
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    long long t0 = nowNs();
    CK(cuModuleLoadData(&mod, kPtx));
    long long t1 = nowNs();
    static bool said = false;
    if (!said) {
        printf("module load (JIT of the PTX) %.3f ms\n", (t1 - t0) / 1e6);
        said = true;
    }
    CK(cuModuleGetFunction(&fTiny, mod, "mk_tiny"));
    CK(cuModuleGetFunction(&fMark, mod, "mk_mark"));
    CK(cuModuleGetFunction(&fBad, mod, "mk_bad"));
    CK(cuModuleGetFunction(&fSpin, mod, "mk_spin"));
    void* h;
    CK(cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    memset(h, 0, 4096);
    slotHost = (volatile unsigned long long*)h;
    CK(cuMemHostGetDevicePointer(&slotDev, h, 0));
    CK(cuEventCreate(&markEvent, CU_EVENT_DISABLE_TIMING));
}

static inline CUresult mark(Kind k, CUstream s, unsigned long long v) {
    switch (k) {
        case WRITE:
            return cuStreamWriteValue64(s, slotDev, v, 0);
        case KERNEL: {
            void* args[] = {&slotDev, &v};
            return cuLaunchKernel(fMark, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
        }
        case MEMSET:
            return cuMemsetD32Async(slotDev, (unsigned)v, 1, s);
        case EVENT:
            return cuEventRecord(markEvent, s);
        default:
            return CUDA_SUCCESS;
    }
}

static inline void launchTiny(CUstream s) {
    CUdeviceptr p = 0;
    void* args[] = {&p};
    CK(cuLaunchKernel(fTiny, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr));
}

static std::vector<char> thrashBuf;
static unsigned thrashSeed = 1;
static void thrash(size_t bytes) {
    // Rewrite `bytes` of a 64 MiB buffer at a moving offset, one store per cache line.
    size_t n = thrashBuf.size();
    size_t at = (thrashSeed * 2654435761u) % (n - bytes);
    thrashSeed++;
    for (size_t i = 0; i < bytes; i += 64) thrashBuf[at + i]++;
}

struct HostResult {
    double med, mean, perOp;
};

static HostResult hostPass(Kind k, CUstream s, int ops, size_t thrashBytes) {
    std::vector<long long> t;
    t.reserve(ops / 32 + 1);
    long long start = nowNs();
    unsigned long long v = 1;
    for (int i = 0; i < ops; i++) {
        if (thrashBytes) thrash(thrashBytes);
        launchTiny(s);
        if (i % 32 == 31 && k != NONE) {
            long long a = nowNs();
            CK(mark(k, s, v++));
            t.push_back(nowNs() - a);
        }
    }
    long long total = nowNs() - start;
    CK(cuStreamSynchronize(s));
    if (k == WRITE || k == KERNEL) {
        if (*slotHost != v - 1) {
            fprintf(stderr, "%s: slot %llu, expected %llu\n", kNames[k], *slotHost, v - 1);
            exit(1);
        }
    }
    *slotHost = 0;
    HostResult r{0, 0, (double)total / ops};
    if (!t.empty()) {
        std::sort(t.begin(), t.end());
        r.med = t[t.size() / 2];
        double sum = 0;
        for (auto x : t) sum += x;
        r.mean = sum / t.size();
    }
    return r;
}

static double gpuPerOp(Kind k, CUstream s, bool bigGap) {
    CUevent a, b;
    CK(cuEventCreate(&a, 0));
    CK(cuEventCreate(&b, 0));
    unsigned long long cycles = 40000000ULL;  // ~20 ms at ~2 GHz
    void* spinArgs[] = {&cycles};
    CK(cuLaunchKernel(fSpin, 1, 1, 1, 1, 1, 1, 0, s, spinArgs, nullptr));
    CK(cuEventRecord(a, s));
    unsigned long long v = 1;
    for (int i = 0; i < 400; i++) {
        launchTiny(s);
        if (k != NONE && (!bigGap || i % 32 == 31)) CK(mark(k, s, v++));
    }
    CK(cuEventRecord(b, s));
    CK(cuEventSynchronize(b));
    float ms;
    CK(cuEventElapsedTime(&ms, a, b));
    cuEventDestroy(a);
    cuEventDestroy(b);
    *slotHost = 0;
    return ms * 1000.0 / 400;
}

static int stickyTrial(Kind k) {
    pid_t pid = fork();
    if (pid == 0) {
        setup();
        CUstream s;
        CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        launchTiny(s);
        CK(mark(k, s, 1));
        CUdeviceptr p = 0;
        void* args[] = {&p};
        CK(cuLaunchKernel(fBad, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
        mark(k, s, 2);
        CUresult r = cuStreamSynchronize(s);
        unsigned long long seen = *slotHost;
        printf("sticky %s: sync %d, slot %llu (expect 1)\n", kNames[k], r, seen);
        fflush(stdout);
        _exit(r != CUDA_SUCCESS && seen == 1 ? 0 : 3);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

int main(int argc, char** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    int bad = 0;
    for (int i = 0; i < 5; i++) bad |= stickyTrial(WRITE) | stickyTrial(KERNEL);
    setup();
    thrashBuf.assign(64 << 20, 0);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    // Warm up every kind.
    for (int k = 0; k < NKINDS; k++) hostPass((Kind)k, s, 3200, 0);
    struct Regime {
        const char* name;
        int ops;
        size_t thrash;
    } regimes[] = {{"warm", 32000, 0}, {"cold256k", 6400, 256 << 10}, {"cold2m", 3200, 2 << 20}};
    for (auto& rg : regimes) {
        std::vector<HostResult> res[NKINDS];
        for (int r = 0; r < rounds; r++)
            for (int j = 0; j < NKINDS; j++) {
                int k = (j + r) % NKINDS;
                res[k].push_back(hostPass((Kind)k, s, rg.ops, rg.thrash));
            }
        for (int k = 0; k < NKINDS; k++) {
            auto& v = res[k];
            std::vector<double> med, mean, per;
            for (auto& x : v) {
                med.push_back(x.med);
                mean.push_back(x.mean);
                per.push_back(x.perOp);
            }
            std::sort(med.begin(), med.end());
            std::sort(mean.begin(), mean.end());
            std::sort(per.begin(), per.end());
            size_t m = v.size() / 2;
            printf("host %-8s %-7s marker call: median-of-medians %6.0f ns (rounds %6.0f..%6.0f), mean %6.0f "
                   "(%6.0f..%6.0f); pass per op %7.0f ns (%7.0f..%7.0f)\n",
                   rg.name, kNames[k], med[m], med.front(), med.back(), mean[m], mean.front(),
                   mean.back(), per[m], per.front(), per.back());
        }
    }
    for (int sparse = 0; sparse < 2; sparse++) {
        std::vector<double> g[NKINDS];
        for (int r = 0; r < rounds; r++)
            for (int j = 0; j < NKINDS; j++) {
                int k = (j + r) % NKINDS;
                g[k].push_back(gpuPerOp((Kind)k, s, sparse));
            }
        for (int k = 0; k < NKINDS; k++) {
            std::sort(g[k].begin(), g[k].end());
            printf("gpu %-14s %-7s %.3f us per op (min %.3f, max %.3f)\n",
                   sparse ? "every-32nd" : "every-op", kNames[k], g[k][g[k].size() / 2],
                   g[k].front(), g[k].back());
        }
    }
    printf("sticky trials: %s\n", bad ? "FAILED" : "all read the marker before the fault");
    return bad;
}
