// launch_loop.cu: host cost per kernel launch, of device-side signals, and resident memory over many
// launches (benchmark, not a test). Used by scripts/bench.sh with and without cudablame.
//   launch_loop [N] [stream|host|paired|probe|rss]
// stream (default): N empty kernels back to back on one stream; prints launch_us=<µs per launch>
//   (this can be bound by the GPU's throughput for tiny kernels, not the host).
// host: the stream is first blocked by a ~2 ms spin kernel, then 256 empty kernels are launched
//   while it spins (enqueue cost only, never waiting for queue space), repeated until N launches;
//   prints launch_us=<host µs per launch> and overruns=<batches that outlasted the spin kernel>.
// probe, probe-legacy: like host (batches of 128, the stream blocked by the spin kernel; probe on a
//   created stream, probe-legacy on the legacy default stream, as PyTorch launches), host µs per call of an
//   empty-kernel launch alone and of a launch followed by one candidate progress signal:
//   cuStreamWriteValue64 / cuStreamWriteValue32 (flags 0) to pinned device-mapped host memory,
//   cuStreamBatchMemOp (one 64-bit write), cuEventRecord (CU_EVENT_DISABLE_TIMING),
//   cuEventRecord + cuEventQuery, cuStreamQuery,
//   cuCtxGetCurrent; plus, when the driver
//   accepts them, the CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER writes. N calls per item, the items
//   interleaved batch by batch in rotating order. One line per item:
//     probe_<name>_us=<median of the batch means> mean=<µs> added=<median minus launch alone>
//     overruns=<batches that outlasted the spin kernel>
// rss: N empty kernels back to back, a stream synchronize every 100,000; prints rss_start_kb,
//   rss_1m_kb (after 1,000,000 launches, when N reaches it) and rss_end_kb (VmRSS of
//   /proc/self/status), rss_hwm_kb (VmHWM), rss_launches and rss_seconds.
// paired (under cudablame): host mode's batches, alternately with cudablame paused
//   (cudablame_pause(1): its pass-through only) and recording, in ABBA order (pair i is paused then
//   recording for even i, the reverse for odd: a linear drift cancels), N launches of each; within
//   one process, so the host's speed, which changes from one process to the next, is the same for
//   both. Prints paired_added_us=<median over pairs of recording minus paused, µs per launch>
//   paired_lo / paired_hi (second smallest and largest of 5 or more pairs, else smallest and
//   largest) paired_n=<pairs> paused_us= recording_us=<median batch µs per launch> overruns=.
//   Without the shim there is no switch: it says so and exits 1.
// BENCH_PAUSED=1 in the environment: after the warm-up, cudablame is paused
//   (cudablame_pause(1), looked up with dlsym(RTLD_DEFAULT)) for the rest of the run, so the
//   timed launches pay only its pass-through (its exported wrapper finds the driver's function,
//   one relaxed load, the driver's call); prints paused=1. Without the shim there is no switch: it says so and exits 1.
// Every CUDA call is checked: on failure it prints the error and exits 1.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

__global__ void empty_kernel() {}

__global__ void spin_kernel(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

static const long long kSpinCycles = 4000000;  // ~2 ms at ~2 GHz

static void check_rt(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "launch_loop: %s failed: %s (%d): %s\n", what, cudaGetErrorName(e), (int)e,
                cudaGetErrorString(e));
        exit(1);
    }
}

static void check_cu(CUresult r, const char *what) {
    if (r != CUDA_SUCCESS) {
        const char *name = nullptr;
        if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "unknown CUresult";
        fprintf(stderr, "launch_loop: %s failed: %s (%d)\n", what, name, (int)r);
        exit(1);
    }
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// A launch error shows up in cudaGetLastError (the <<<>>> syntax returns nothing).
static void check_launches(const char *what) { check_rt(cudaGetLastError(), what); }

// One batch of host and paired mode: the stream blocked by the spin kernel, `batch` empty kernels
// launched behind it; returns their host µs in all, and counts an overrun when the spin kernel had
// finished by the end of the batch (the stream idle then: the timing may include waiting on the
// GPU). Synchronizes the stream before returning.
static const int kBatch = 256;
static double blocked_batch_us(cudaStream_t s, int &overruns, const char *what) {
    spin_kernel<<<1, 1, 0, s>>>(kSpinCycles);
    double t0 = now_us();
    for (int i = 0; i < kBatch; i++) empty_kernel<<<1, 32, 0, s>>>();
    double t1 = now_us();
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) {
        overruns++;
    } else if (q != cudaErrorNotReady) {
        check_rt(q, "cudaStreamQuery");
    }
    check_launches(what);
    check_rt(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    return t1 - t0;
}

// Host mode: returns µs per launch (n rounded up to whole batches).
static double host_mode(cudaStream_t s, int &n, int &overruns) {
    double total_us = 0;
    overruns = 0;
    for (int done = 0; done < n; done += kBatch) {
        total_us += blocked_batch_us(s, overruns, "kernel launch (host mode)");
    }
    n = (n + kBatch - 1) / kBatch * kBatch;
    return total_us / n;
}

static double median(std::vector<double> v);

// The exported switch of cudablame (`int cudablame_pause(int paused)`, returns the previous
// state), or null without the shim.
static int (*pause_switch())(int) { return (int (*)(int))dlsym(RTLD_DEFAULT, "cudablame_pause"); }

// Paired mode (see the header): 0, or 1 without cudablame.
static int paired_mode(cudaStream_t s, int n) {
    int (*set_paused)(int) = pause_switch();
    if (!set_paused) {
        fprintf(stderr, "launch_loop: paired needs cudablame's cudablame_pause (not loaded)\n");
        return 1;
    }
    int pairs = n / kBatch < 1 ? 1 : n / kBatch;
    int overruns = 0;
    std::vector<double> added, paused_us, recording_us;
    auto one_batch = [&](bool paused) {
        set_paused(paused ? 1 : 0);
        return blocked_batch_us(s, overruns, "kernel launch (paired mode)") / kBatch;
    };
    int before = set_paused(0);
    for (int i = 0; i < pairs; i++) {
        double a, b;
        if (i % 2 == 0) {
            a = one_batch(true);
            b = one_batch(false);
        } else {
            b = one_batch(false);
            a = one_batch(true);
        }
        paused_us.push_back(a);
        recording_us.push_back(b);
        added.push_back(b - a);
    }
    set_paused(before);
    std::vector<double> sorted = added;
    std::sort(sorted.begin(), sorted.end());
    size_t k = sorted.size() >= 5 ? 1 : 0;
    printf("paired_added_us=%.3f paired_lo=%.3f paired_hi=%.3f paired_n=%d paused_us=%.3f "
           "recording_us=%.3f overruns=%d\n",
           median(added), sorted[k], sorted[sorted.size() - 1 - k], pairs, median(paused_us),
           median(recording_us), overruns);
    return 0;
}

static double stream_mode(cudaStream_t s, int n) {
    double t0 = now_us();
    for (int i = 0; i < n; i++) empty_kernel<<<1, 32, 0, s>>>();
    double t1 = now_us();
    check_launches("kernel launch (stream mode)");
    check_rt(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    return (t1 - t0) / n;
}

// ------------------------------------------------------------------------------------ probe mode

enum Kind { LAUNCH, WV64, WV32, EVENT, QUERY, CTX, WV32_NB, WV64_NB, EVENT_QUERY, BATCH64 };

struct Item {
    const char *name;
    Kind kind;
    bool optional;  // the driver may refuse it: then reported as unsupported, not an error
    bool skip;
    int overruns;
    std::vector<double> batch_us;  // mean µs per call of each batch
};

struct Target {
    CUstream stream;
    CUdeviceptr slot64;  // device address of 8 bytes of pinned device-mapped host memory
    CUdeviceptr slot32;  // another 8-byte-aligned word of it
    CUevent event;
};

// The signal of `kind` after a launch (LAUNCH: none). cuStreamQuery's CUDA_ERROR_NOT_READY (the
// stream is blocked, as intended) counts as success.
static inline CUresult signal(Kind kind, const Target &t, uint64_t seq) {
    switch (kind) {
    case LAUNCH:
        return CUDA_SUCCESS;
    case WV64:
        return cuStreamWriteValue64(t.stream, t.slot64, (cuuint64_t)seq, 0);
    case WV32:
        return cuStreamWriteValue32(t.stream, t.slot32, (cuuint32_t)seq, 0);
    case EVENT:
        return cuEventRecord(t.event, t.stream);
    case BATCH64: {
        CUstreamBatchMemOpParams op = {};
        op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        op.writeValue.address = t.slot64;
        op.writeValue.value64 = (cuuint64_t)seq;
        op.writeValue.flags = 0;
        return cuStreamBatchMemOp(t.stream, 1, &op, 0);
    }
    case EVENT_QUERY: {
        CUresult r = cuEventRecord(t.event, t.stream);
        if (r != CUDA_SUCCESS) return r;
        r = cuEventQuery(t.event);
        return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
    }
    case QUERY: {
        CUresult r = cuStreamQuery(t.stream);
        return r == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : r;
    }
    case CTX: {
        CUcontext ctx = nullptr;
        return cuCtxGetCurrent(&ctx);
    }
    case WV32_NB:
        return cuStreamWriteValue32(t.stream, t.slot32, (cuuint32_t)seq,
                                    CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER);
    case WV64_NB:
        return cuStreamWriteValue64(t.stream, t.slot64, (cuuint64_t)seq,
                                    CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static const char *cu_name(CUresult r) {
    const char *name = nullptr;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) return "unknown CUresult";
    return name;
}

static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

static int probe_mode(cudaStream_t s, int n) {
    Target t;
    t.stream = (CUstream)s;  // a cudaStream_t is a CUstream
    void *host = nullptr;
    check_cu(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
             "cuMemHostAlloc");
    memset(host, 0, 4096);
    CUdeviceptr base = 0;
    check_cu(cuMemHostGetDevicePointer(&base, host, 0), "cuMemHostGetDevicePointer");
    t.slot64 = base;
    t.slot32 = base + 64;
    check_cu(cuEventCreate(&t.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    volatile uint64_t *host64 = (volatile uint64_t *)host;
    volatile uint32_t *host32 = (volatile uint32_t *)((char *)host + 64);

    std::vector<Item> items = {
        {"launch", LAUNCH, false, false, 0, {}},
        {"launch_wv64", WV64, false, false, 0, {}},
        {"launch_wv32", WV32, false, false, 0, {}},
        {"launch_batch64", BATCH64, true, false, 0, {}},
        {"launch_event", EVENT, false, false, 0, {}},
        {"launch_event_query", EVENT_QUERY, false, false, 0, {}},
        {"launch_query", QUERY, false, false, 0, {}},
        {"launch_ctx", CTX, false, false, 0, {}},
        {"launch_wv32_nobarrier", WV32_NB, true, false, 0, {}},
        {"launch_wv64_nobarrier", WV64_NB, true, false, 0, {}},
    };

    // One trial call of each signal on an idle stream: the writes must land in host memory.
    for (auto &it : items) {
        check_rt(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        CUresult r = signal(it.kind, t, 42);
        if (r != CUDA_SUCCESS) {
            if (!it.optional) check_cu(r, it.name);
            printf("probe_%s_us=unsupported (%s)\n", it.name, cu_name(r));
            it.skip = true;
            continue;
        }
        check_cu(cuStreamSynchronize(t.stream), "cuStreamSynchronize");
        bool wrote64 = it.kind == WV64 || it.kind == WV64_NB || it.kind == BATCH64;
        bool wrote32 = it.kind == WV32 || it.kind == WV32_NB;
        if ((wrote64 && *host64 != 42) || (wrote32 && *host32 != 42)) {
            fprintf(stderr, "launch_loop: %s: the value did not arrive in host memory\n", it.name);
            return 1;
        }
        *host64 = 0;
        *host32 = 0;
    }

    const int batch = 128;  // 256 ops with a signal each: well inside the launch queue
    int batches = (n + batch - 1) / batch;
    uint64_t seq = 0;
    for (int b = 0; b < batches; b++) {
        for (size_t k = 0; k < items.size(); k++) {
            Item &it = items[(b + k) % items.size()];  // rotating order
            if (it.skip) continue;
            spin_kernel<<<1, 1, 0, s>>>(kSpinCycles);
            check_launches("spin kernel launch");
            CUresult bad = CUDA_SUCCESS;
            double t0 = now_us();
            for (int i = 0; i < batch; i++) {
                empty_kernel<<<1, 32, 0, s>>>();
                CUresult r = signal(it.kind, t, ++seq);
                if (r != CUDA_SUCCESS) bad = r;
            }
            double t1 = now_us();
            check_cu(bad, it.name);
            CUresult q = cuStreamQuery(t.stream);
            if (q == CUDA_SUCCESS) {
                it.overruns++;
            } else if (q != CUDA_ERROR_NOT_READY) {
                check_cu(q, "cuStreamQuery");
            }
            check_launches("kernel launch (probe mode)");
            check_cu(cuStreamSynchronize(t.stream), "cuStreamSynchronize");
            it.batch_us.push_back((t1 - t0) / batch);
        }
    }

    double launch_alone = median(items[0].batch_us);
    for (auto &it : items) {
        if (it.skip) continue;
        double sum = 0;
        for (double v : it.batch_us) sum += v;
        double med = median(it.batch_us);
        printf("probe_%s_us=%.3f mean=%.3f added=%.3f overruns=%d\n", it.name, med,
               sum / it.batch_us.size(), med - launch_alone, it.overruns);
    }
    printf("probe_calls_per_item=%d batch=%d\n", batches * batch, batch);
    check_cu(cuEventDestroy(t.event), "cuEventDestroy");
    check_cu(cuMemFreeHost(host), "cuMemFreeHost");
    return 0;
}

// -------------------------------------------------------------------------------------- rss mode

static long status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    size_t len = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, key, len) && line[len] == ':') {
            kb = atol(line + len + 1);
            break;
        }
    }
    fclose(f);
    return kb;
}

static int rss_mode(cudaStream_t s, long n) {
    const long sync_every = 100000, at = 1000000;
    printf("rss_start_kb=%ld\n", status_kb("VmRSS"));
    fflush(stdout);
    double t0 = now_us();
    for (long i = 1; i <= n; i++) {
        empty_kernel<<<1, 32, 0, s>>>();
        if (i % sync_every == 0 || i == n) {
            check_launches("kernel launch (rss mode)");
            check_rt(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        }
        if (i == at) {
            printf("rss_1m_kb=%ld\n", status_kb("VmRSS"));
            fflush(stdout);
        }
    }
    double t1 = now_us();
    printf("rss_end_kb=%ld\nrss_hwm_kb=%ld\nrss_launches=%ld\nrss_seconds=%.1f\n",
           status_kb("VmRSS"), status_kb("VmHWM"), n, (t1 - t0) / 1e6);
    return 0;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    const char *mode = argc > 2 ? argv[2] : "stream";
    if (n <= 0 || n > 2000000000L ||
        (strcmp(mode, "stream") && strcmp(mode, "host") && strcmp(mode, "paired") &&
         strcmp(mode, "probe") &&
         strcmp(mode, "probe-legacy") && strcmp(mode, "rss"))) {
        fprintf(stderr, "usage: launch_loop [N] [stream|host|paired|probe|probe-legacy|rss]\n");
        return 2;
    }
    cudaStream_t s;
    check_rt(cudaStreamCreate(&s), "cudaStreamCreate");
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 32, 0, s>>>();
    check_launches("warm-up launch");
    check_rt(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const char *paused = getenv("BENCH_PAUSED");
    if (paused && !strcmp(paused, "1")) {
        int (*set_paused)(int) = pause_switch();
        if (!set_paused) {
            fprintf(stderr, "launch_loop: BENCH_PAUSED=1, but there is no cudablame_pause "
                            "(cudablame is not loaded)\n");
            return 1;
        }
        set_paused(1);
        printf("paused=1\n");
    }

    int rc = 0;
    if (!strcmp(mode, "probe")) {
        rc = probe_mode(s, (int)n);
    } else if (!strcmp(mode, "probe-legacy")) {
        rc = probe_mode(cudaStreamLegacy, (int)n);
    } else if (!strcmp(mode, "paired")) {
        rc = paired_mode(s, (int)n);
    } else if (!strcmp(mode, "rss")) {
        rc = rss_mode(s, n);
    } else if (!strcmp(mode, "host")) {
        int count = (int)n, overruns = 0;
        double us = host_mode(s, count, overruns);
        printf("launch_us=%.3f overruns=%d launches=%d err=0\n", us, overruns, count);
    } else {
        double us = stream_mode(s, (int)n);
        printf("launch_us=%.3f launches=%ld err=0\n", us, n);
    }
    check_rt(cudaStreamDestroy(s), "cudaStreamDestroy");
    return rc;
}
