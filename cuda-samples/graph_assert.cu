// EXPECT kernel=checked_index site=replay error=CUDA_ERROR_ASSERT confidence=exact reporter=cuCtxSynchronize assert="Assertion `j < n` failed" stdout=same
//
// graph_assert.cu: a device-side assert inside a CUDA graph replay while another
// stream is busy.
//
// Timeline:
//   capture_pipeline(G)   captures scale, checked_index, scale into a graph
//                         (stream capture on G), instantiated
//   replay 1              good indices -> good (cudaStreamSynchronize)
//   idx[37] = n           BUG: one past the end (a cudaMemcpy into the index buffer)
//   launch_spins(A)       spin (300 ms) x 2 on stream A            -> good, busy
//   replay 2              cudaGraphLaunch on G: checked_index asserts -> CULPRIT, 710
//   cudaDeviceSynchronize()                                       -> REPORTS
//
// Two candidates by markers: A's spin and G's graph launch (likely). The driver
// prints "graph_assert.cu:NN: void checked_index(...): ... Assertion `j < n`
// failed." on stdout; only the graph launch runs checked_index: exact, the
// culprit op is the graph launch, named by its kernels ("graph: scale,
// checked_index"), its launch stack through replay() (site=), and its kernels'
// capture-time stacks through capture_pipeline (in the JSON report).
//
// Expected: "sample-error: cudaErrorAssert at cudaDeviceSynchronize() ...",
// exit 1.
#include <cassert>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void spin(long long ns) {
    const unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < ns) __nanosleep(1000);
}

__global__ void scale(float* x, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) x[i] *= 2.0f;
}

__global__ void checked_index(const int* idx, float* out, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) {
        int j = idx[i];
        assert(j < n);
        out[i] = float(j);
    }
}

__attribute__((noinline)) cudaError_t capture_pipeline(cudaStream_t g, const int* idx, float* out,
                                                       int n, int m, cudaGraphExec_t* exec) {
    cudaGraph_t graph;
    cudaError_t e = cudaStreamBeginCapture(g, cudaStreamCaptureModeGlobal);
    if (e != cudaSuccess) return e;
    scale<<<1, 64, 0, g>>>(out, m);
    checked_index<<<1, 64, 0, g>>>(idx, out, n, m);
    scale<<<1, 64, 0, g>>>(out, m);
    e = cudaStreamEndCapture(g, &graph);
    if (e != cudaSuccess) return e;
    return cudaGraphInstantiate(exec, graph, 0);
}

__attribute__((noinline)) cudaError_t replay(cudaGraphExec_t exec, cudaStream_t g) {
    cudaError_t e = cudaGraphLaunch(exec, g);
    __asm__ volatile("" ::: "memory");  // keeps this frame: no tail call into cudaGraphLaunch
    return e;
}

__attribute__((noinline)) cudaError_t launch_spins(cudaStream_t a) {
    for (int k = 0; k < 2; ++k) spin<<<1, 1, 0, a>>>(300LL * 1000 * 1000);
    return cudaGetLastError();
}

int main() {
    const int n = 256, m = 64;
    int host_idx[m];
    for (int i = 0; i < m; ++i) host_idx[i] = (i * 7) % n;
    int* idx = nullptr;
    float* out = nullptr;
    cudaStream_t a, g;
    cudaGraphExec_t exec;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&g, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&idx, sizeof(host_idx)));
    CHECK(cudaMalloc(&out, m * sizeof(float)));
    CHECK(cudaMemcpy(idx, host_idx, sizeof(host_idx), cudaMemcpyHostToDevice));
    CHECK(capture_pipeline(g, idx, out, n, m, &exec));
    CHECK(replay(exec, g));
    CHECK(cudaStreamSynchronize(g));

    host_idx[37] = n;  // BUG: one past the end
    CHECK(cudaMemcpy(idx, host_idx, sizeof(host_idx), cudaMemcpyHostToDevice));
    CHECK(launch_spins(a));
    CHECK(replay(exec, g));
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
