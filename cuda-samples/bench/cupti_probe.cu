// cupti_probe.cu: can CUPTI tell which of several running kernels faulted, and at what cost?
// (An experiment for issue 15 item 3, not a test; run by hand on the GPU.)
//
// Build and run (CUDA 13.0, H200; CUPTI is under /usr/local/cuda/extras/CUPTI):
//   nvcc -O2 -g -arch=sm_90 -o /tmp/cupti_probe cuda-samples/bench/cupti_probe.cu \
//        -I/usr/local/cuda/extras/CUPTI/include -L/usr/local/cuda/extras/CUPTI/lib64 -lcupti \
//        -Xlinker -rpath=/usr/local/cuda/extras/CUPTI/lib64
//   /tmp/cupti_probe            # prints one "Q1 ..." to "Q3 ..." result line each, plus details
//
// Q1 cost: host ns per empty-kernel launch, 100,000 launches, with CUPTI activity
//    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL disabled vs enabled (3 interleaved rounds each,
//    min and median shown).
// Q2 records after a sticky 700: three streams; A and B run spin kernels (300 ms), C runs
//    oob_store, which stores to address 0x10 after 5 ms (700). After cudaDeviceSynchronize
//    returns the error, cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) is called and
//    every kernel record delivered is printed (name, stream, start, end, completed).
// Q3 verdict: do the records tell which kernel faulted? "yes" only if exactly the faulting
//    kernel's record differs (e.g. it alone has a record, or an end stamp, or a completed
//    stamp), else "no", with the evidence.
//
// The kernel record is read through the prefix that every CUpti_ActivityKernelN (4 to 9 at
// least) shares (kind ... name); if CUDA 13 changed that prefix, names print as garbage: then
// replace KernelPrefix by the header's newest CUpti_ActivityKernelN.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <cupti.h>

#define CUPTI_CHECK(call)                                                                 \
    do {                                                                                  \
        CUptiResult r_ = (call);                                                          \
        if (r_ != CUPTI_SUCCESS) {                                                        \
            const char* s_ = nullptr;                                                     \
            cuptiGetResultString(r_, &s_);                                                \
            printf("CUPTI error %d (%s) at %s\n", (int)r_, s_ ? s_ : "?", #call);       \
            exit(2);                                                                      \
        }                                                                                 \
    } while (0)

#define CHECK(call)                                                                       \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            printf("CUDA error %s at %s\n", cudaGetErrorName(e_), #call);                 \
            exit(2);                                                                      \
        }                                                                                 \
    } while (0)

// The common prefix of CUpti_ActivityKernel4..9 (natural alignment, 8-byte records).
struct KernelPrefix {
    uint32_t kind;
    uint8_t cacheConfig;
    uint8_t sharedMemoryConfig;
    uint16_t registersPerThread;
    uint32_t partitionedGlobalCacheRequested;
    uint32_t partitionedGlobalCacheExecuted;
    uint64_t start;
    uint64_t end;
    uint64_t completed;
    uint32_t deviceId;
    uint32_t contextId;
    uint32_t streamId;
    int32_t gridX, gridY, gridZ, blockX, blockY, blockZ;
    int32_t staticSharedMemory, dynamicSharedMemory;
    uint32_t localMemoryPerThread, localMemoryTotal;
    uint32_t correlationId;
    int64_t gridId;
    const char* name;
};

struct Rec {
    std::string name;
    uint32_t stream;
    uint64_t start, end, completed;
};
static std::vector<Rec> records;
static size_t dropped_total = 0;

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *size = 8 << 20;
    *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            auto* k = reinterpret_cast<KernelPrefix*>(rec);
            records.push_back({k->name ? k->name : "?", k->streamId, k->start, k->end, k->completed});
        }
    }
    free(buffer);
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__global__ void empty() {}
__global__ void spin(long long ns) {
    const unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < ns) __nanosleep(1000);
}
__global__ void oob_store(long long delay_ns) {
    const unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < delay_ns) __nanosleep(1000);
    *reinterpret_cast<volatile int*>(uintptr_t(0x10)) = 1;  // nothing is mapped there: 700
}

// Host ns per launch of `n` empty kernels (launch calls only, then one sync outside the timing).
static double launch_ns(cudaStream_t s, int n) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) empty<<<1, 1, 0, s>>>();
    auto t1 = std::chrono::steady_clock::now();
    CHECK(cudaStreamSynchronize(s));
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    const int n = 100000;
    cudaStream_t a, b, c;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking));
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    launch_ns(a, 1000);  // warm-up (module load)

    // ---- Q1: cost
    std::vector<double> off, on;
    for (int round = 0; round < 3; ++round) {
        off.push_back(launch_ns(a, n));
        CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        on.push_back(launch_ns(a, n));
        CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        CUPTI_CHECK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    }
    size_t cost_records = records.size();
    records.clear();
    printf("detail: per-launch ns without CUPTI: %.0f %.0f %.0f; with CONCURRENT_KERNEL: %.0f %.0f %.0f; "
           "records delivered during the cost rounds: %zu (expected %d)\n",
           off[0], off[1], off[2], on[0], on[1], on[2], cost_records, 3 * n);
    printf("Q1 cost: CONCURRENT_KERNEL activity adds %.0f ns per launch (median %.0f -> %.0f ns, min %.0f -> %.0f ns, %d launches x 3 rounds)\n",
           median(on) - median(off), median(off), median(on), *std::min_element(off.begin(), off.end()),
           *std::min_element(on.begin(), on.end()), n);

    // ---- Q2: records after a sticky 700 with three busy streams
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    empty<<<1, 1, 0, a>>>();  // completed kernels, for comparison
    empty<<<1, 1, 0, b>>>();
    CHECK(cudaDeviceSynchronize());
    oob_store<<<1, 1, 0, c>>>(5LL * 1000 * 1000);
    spin<<<1, 1, 0, a>>>(300LL * 1000 * 1000);
    spin<<<1, 1, 0, b>>>(300LL * 1000 * 1000);
    cudaError_t e = cudaDeviceSynchronize();
    printf("detail: cudaDeviceSynchronize returned %s\n", cudaGetErrorName(e));
    CUptiResult fr = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    const char* frs = nullptr;
    cuptiGetResultString(fr, &frs);
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
    dropped_total += dropped;
    printf("detail: cuptiActivityFlushAll after the fault: %s; kernel records: %zu; dropped: %zu\n",
           frs ? frs : "?", records.size(), dropped_total);
    uint64_t t0 = UINT64_MAX;
    for (auto& r : records) t0 = std::min(t0, r.start ? r.start : t0);
    int oob_records = 0, spin_records = 0;
    bool oob_differs = false;
    const Rec* oob = nullptr;
    for (auto& r : records) {
        auto rel = [&](uint64_t t) { return t ? (double)(t - t0) / 1e6 : -1.0; };
        printf("record: %-12s stream %u start %.3f ms end %.3f ms completed %.3f ms (raw end %llu completed %llu)\n",
               r.name.c_str(), r.stream, rel(r.start), rel(r.end), rel(r.completed),
               (unsigned long long)r.end, (unsigned long long)r.completed);
        if (r.name.find("oob_store") != std::string::npos) {
            ++oob_records;
            oob = &r;
        }
        if (r.name.find("spin") != std::string::npos) ++spin_records;
    }
    printf("Q2 records after sticky 700: %zu kernel records delivered (oob_store: %d, spin: %d of 2 running, empty: %zu)\n",
           records.size(), oob_records, spin_records, records.size() - oob_records - spin_records);
    if (oob && spin_records == 0) {
        oob_differs = true;
    } else if (oob) {
        for (auto& r : records) {
            if (r.name.find("spin") == std::string::npos) continue;
            bool end_differs = (r.end == 0) != (oob->end == 0);
            bool completed_differs = (r.completed == 0 || r.completed == UINT64_MAX) !=
                                     (oob->completed == 0 || oob->completed == UINT64_MAX);
            oob_differs = oob_differs || end_differs || completed_differs;
        }
    }
    printf("Q3 does CUPTI tell which kernel faulted: %s\n",
           oob_differs ? "yes: the faulting kernel's record differs from the killed kernels' (see records; check it is not by luck)"
           : oob ? "no: the faulting kernel's record looks like the killed kernels' records (same fields set)"
                 : "no: no record for the faulting kernel was delivered");
    return 0;
}
