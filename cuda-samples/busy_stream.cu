// EXPECT kernel=side_fault site=launch_on_side_stream error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=likely reporter=cuStreamSynchronize
//
// busy_stream.cu: the culprit runs on a side stream while another stream is
// busy with many long kernels; the error is reported by a synchronize of the
// busy stream.
//
// Timeline (two non-blocking streams):
//   warm_up_streams(A, B)      spin (0 ns) on A, side_fault on a valid buffer
//                              on B, cudaDeviceSynchronize  -> good: both
//                                                             kernels loaded
//   launch_busy_work(A)        20 x spin (2 ms each, 1 thread) -> good, ~40 ms
//                                                             of queued work;
//                                                             the last spin
//                                                             also waits for
//                                                             side_fault to
//                                                             start (at most 1 s)
//   launch_on_side_stream(B)   side_fault                   -> CULPRIT, launched
//                                                             last: writes
//                                                             through 0x10 at
//                                                             once -> 700
//   cudaStreamSynchronize(A)                                -> REPORTS
//                                                             (cuStreamSynchronize)
//
// Why confidence=likely, not exact: when the context dies, stream A is in the
// middle of its spin kernels (the fault comes within microseconds of B's
// launch, ~40 ms before A would finish), so two streams have a first
// unfinished op: one of A's spins and B's side_fault. Progress markers cannot
// say which of the two faulted; cudablame ranks the most recently launched
// one first (a fault kills the context microseconds after the faulting
// kernel starts, while a busy stream's first unfinished op was queued long
// before), which is side_fault: culprit, likely; A's spin is the first
// suspect.
//
// What makes A reliably still busy when side_fault runs (an earlier version
// exited 0 on the H200: cudaStreamSynchronize(A) succeeded, so the fault
// came after A had drained):
//   - Lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2)
//     loads a kernel at its first launch, and loading may synchronize the
//     context (CUDA programming guide, lazy loading hazards): the first
//     launch of side_fault, made while A's spins ran, could wait for all of
//     them, and side_fault ran once A was idle (the likely cause of the
//     exit 0). warm_up_streams() launches both kernels once beforehand, so
//     the real launches load nothing.
//   - CUDA_DEVICE_MAX_CONNECTIONS=1 (common in Megatron-style environments)
//     puts both streams in one hardware queue, where B's kernel, queued
//     behind A's work, starts only as A drains; main() sets it to 8 before
//     the first CUDA call so A and B get queues of their own.
//   - The last spin on A waits (at most kHoldNs) for side_fault to start
//     before its own 2 ms, so A cannot drain first even if the host is slow
//     between launching A's work and B's culprit.
// The spins and side_fault stamp %globaltimer into host-mapped pinned memory
// (readable by the host even after the context died); main prints them as
// one "busy_stream-diag:" line on stderr after cudaStreamSynchronize(A),
// whatever it returned: times in us from the start of A's first busy spin,
// "-" for never (a spin killed by the fault has no end). Should
// cudaStreamSynchronize(A) succeed after all, a backstop
// cudaDeviceSynchronize() makes the program fail anyway (the report then
// names cuCtxSynchronize, which gpu-check's reporter= check shows), after a
// second diag line.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaStreamSynchronize(a)
// ...", exit 1.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#include "check.h"

constexpr int kSpins = 20;
constexpr long long kSpinNs = 2LL * 1000 * 1000;     // 2 ms per spin
constexpr long long kHoldNs = 1000LL * 1000 * 1000;  // the last spin waits <= 1 s for side_fault
constexpr int kSideThreads = 256;

// globaltimer stamps (ns), written by the GPU into host-mapped memory; 0 = never.
struct Diag {
    unsigned long long side_start;  // side_fault's thread 0, right before the bad store
    unsigned long long spin_start[kSpins];
    unsigned long long spin_end[kSpins];
};

// Stands for a long-running kernel (one thread): first waits up to hold_ns
// for side_fault to start, then is busy for ns nanoseconds.
__global__ void spin(long long ns, long long hold_ns, int k, Diag* d) {
    volatile Diag* v = d;
    const unsigned long long t0 = global_ns();
    v->spin_start[k] = t0;
    __threadfence_system();
    while (hold_ns > 0 && v->side_start == 0 && (long long)(global_ns() - t0) < hold_ns) {
        __nanosleep(1000);
    }
    const unsigned long long t1 = global_ns();
    while ((long long)(global_ns() - t1) < ns) __nanosleep(500);
    v->spin_end[k] = global_ns();
    __threadfence_system();
}

// One block: thread 0 stamps the start, then every thread stores to out.
__global__ void side_fault(float* out, int n, Diag* d) {
    int i = threadIdx.x;
    if (i == 0) {
        volatile Diag* v = d;
        v->side_start = global_ns();
        __threadfence_system();
    }
    __syncthreads();
    if (i < n) out[i] = float(i);
}

// Loads both kernels (lazy loading) before the timed part.
__attribute__((noinline)) cudaError_t warm_up_streams(cudaStream_t a, cudaStream_t b,
                                                      float* scratch, Diag* d) {
    spin<<<1, 1, 0, a>>>(0, 0, 0, d);
    side_fault<<<1, kSideThreads, 0, b>>>(scratch, kSideThreads, d);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_busy_work(cudaStream_t a, Diag* d) {
    for (int k = 0; k < kSpins; ++k) {
        spin<<<1, 1, 0, a>>>(kSpinNs, k == kSpins - 1 ? kHoldNs : 0, k, d);
    }
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_on_side_stream(cudaStream_t b, Diag* d) {
    // BUG: the side buffer was never allocated.
    float* out = reinterpret_cast<float*>(uintptr_t(0x10));
    side_fault<<<1, kSideThreads, 0, b>>>(out, kSideThreads, d);
    return cudaGetLastError();
}

// One stderr line: the GPU's stamps, in us from the start of A's first spin.
void print_diag(const char* after, cudaError_t e, const Diag* host) {
    const volatile Diag* v = host;
    const unsigned long long base = v->spin_start[0];
    char buf[64];
    auto us = [&](unsigned long long t) -> const char* {
        if (t == 0) return "-";
        if (base == 0) {
            snprintf(buf, sizeof buf, "%llu ns (absolute)", t);
        } else {
            snprintf(buf, sizeof buf, "%.1f", double((long long)(t - base)) / 1000.0);
        }
        return buf;
    };
    int unfinished = 0;
    for (int k = 0; k < kSpins; ++k) unfinished += v->spin_end[k] == 0;
    fprintf(stderr, "busy_stream-diag: after %s (%s): side_fault started at %s us;", after,
            cudaGetErrorName(e), us(v->side_start));
    fprintf(stderr, " %d of %d spins on A never ended; spin start/end us:", unfinished, kSpins);
    for (int k = 0; k < kSpins; ++k) {
        fprintf(stderr, " %d:%s", k, us(v->spin_start[k]));
        fprintf(stderr, "/%s", us(v->spin_end[k]));
    }
    fprintf(stderr, "\n");
}

int main() {
    // Before the first CUDA call (the driver reads it when the context is created).
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8", 1);

    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    // The diagnostics: pinned host memory, mapped for the GPU, zeroed before
    // any kernel touches it. The warm-up stamps into device memory that
    // nothing reads (its spin does not hold).
    void* host_addr = nullptr;
    void* dev_addr = nullptr;
    CHECK(cudaHostAlloc(&host_addr, sizeof(Diag), cudaHostAllocMapped));
    memset(host_addr, 0, sizeof(Diag));
    CHECK(cudaHostGetDevicePointer(&dev_addr, host_addr, 0));
    const Diag* diag = static_cast<const Diag*>(host_addr);
    Diag* diag_dev = static_cast<Diag*>(dev_addr);

    Diag* warm_diag = nullptr;
    float* scratch = nullptr;
    CHECK(cudaMalloc(&warm_diag, sizeof(Diag)));
    CHECK(cudaMalloc(&scratch, kSideThreads * sizeof(float)));
    CHECK(warm_up_streams(a, b, scratch, warm_diag));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_busy_work(a, diag_dev));
    CHECK(launch_on_side_stream(b, diag_dev));
    const cudaError_t synced = cudaStreamSynchronize(a);  // REPORTS
    print_diag("cudaStreamSynchronize(a)", synced, diag);
    if (synced != cudaSuccess) return sample_error(synced, "cudaStreamSynchronize(a)");

    printf("unexpected: no error at cudaStreamSynchronize(a)\n");
    const cudaError_t backstop = cudaDeviceSynchronize();
    print_diag("cudaDeviceSynchronize()", backstop, diag);
    if (backstop != cudaSuccess) return sample_error(backstop, "cudaDeviceSynchronize()");
    printf("unexpected: no error\n");
    return 0;
}
