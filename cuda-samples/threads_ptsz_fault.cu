// EXPECT kernel=scatter_rows site=launch_scatter error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=likely reporter=cuCtxSynchronize
// BUILD-FLAGS: --default-stream=per-thread -lpthread
//
// threads_ptsz_fault.cu: four std::threads launch on their per-thread default
// streams (nvcc --default-stream=per-thread: launches go through
// cuLaunchKernel_ptsz); one of them faults with an illegal address.
//
// Timeline:
//   every worker: warm_up()   spin (1 ms) + scatter_rows on a good buffer,
//                             cudaStreamSynchronize(cudaStreamPerThread) -> good
//   barrier
//   workers 0, 1, 3:          spin (300 ms each, 2 per thread)      -> good
//   worker 2 (5 ms later):    launch_scatter(): scatter_rows on a
//                             pointer that was never allocated       -> CULPRIT, 700
//   main: join, cudaDeviceSynchronize()                              -> REPORTS
//
// When the fault kills the context, four per-thread streams have an
// unfinished first op: three spins and scatter_rows. Markers alone cannot say
// which faulted (likely). What can be stated: every candidate ran before
// (warm-up), and scatter_rows was launched last, after all spins: it ranks
// first. Launches come from std::thread workers: the launch stack must name
// the worker's program frames (site=launch_scatter, and worker_main below it),
// not only libstdc++/libc frames.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaDeviceSynchronize()
// ...", exit 1.
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>
#include <pthread.h>
#include <cuda_runtime.h>

#include "check.h"

__global__ void spin(long long ns) {
    const unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < ns) __nanosleep(1000);
}

__global__ void scatter_rows(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = float(i);
}

static pthread_barrier_t barrier;
static float* scratch[4];
static cudaError_t results[4];

__attribute__((noinline)) cudaError_t warm_up(float* buf) {
    spin<<<1, 1>>>(1000LL * 1000);
    scatter_rows<<<1, 256>>>(buf, 256);
    return cudaStreamSynchronize(cudaStreamPerThread);
}

__attribute__((noinline)) cudaError_t launch_scatter() {
    // BUG: this worker's output buffer was never allocated.
    float* out = reinterpret_cast<float*>(uintptr_t(0x10));
    scatter_rows<<<1, 256>>>(out, 256);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_spins() {
    for (int k = 0; k < 2; ++k) spin<<<1, 1>>>(300LL * 1000 * 1000);
    return cudaGetLastError();
}

__attribute__((noinline)) void worker_main(int id) {
    cudaError_t e = warm_up(scratch[id]);
    pthread_barrier_wait(&barrier);
    if (e == cudaSuccess) {
        if (id == 2) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            e = launch_scatter();
        } else {
            e = launch_spins();
        }
    }
    results[id] = e;
}

int main() {
    for (auto& s : scratch) CHECK(cudaMalloc(&s, 256 * sizeof(float)));
    pthread_barrier_init(&barrier, nullptr, 4);
    std::vector<std::thread> workers;
    for (int id = 0; id < 4; ++id) workers.emplace_back(worker_main, id);
    for (auto& t : workers) t.join();
    for (int id = 0; id < 4; ++id) {
        if (results[id] != cudaSuccess) fprintf(stderr, "worker %d: %s\n", id, cudaGetErrorName(results[id]));
    }
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
