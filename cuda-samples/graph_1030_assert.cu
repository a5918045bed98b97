// EXPECT kernel=check_kernel error=CUDA_ERROR_ASSERT confidence=oneof window=2 among=graph reporter=cuCtxSynchronize assert="Assertion `j < n` failed" stdout=same
//
// graph_1030_assert.cu: a device-side assert in the last kernel of a CUDA
// graph longer than cudablame keeps (1,024 captured ops per graph), beside a
// healthy kernel of the same name in another namespace (issue 19, item 4).
//
// Timeline:
//   capture_long_graph(G)  1,029 x fill, then pipeline::check_kernel (1,030
//                          kernel nodes), instantiated
//   launch_audit(A)        audit::check_kernel: healthy, spins 300 ms       -> busy
//   replay(G)              the graph: pipeline::check_kernel asserts         -> CULPRIT, 710
//   cudaDeviceSynchronize()                                                -> REPORTS
//
// The driver prints "graph_1030_assert.cu:NN: void pipeline::check_kernel(
// const int *, int, int): block: [0,0,0], thread: [..] Assertion `j < n`
// failed." Two ops can have faulted (A's audit::check_kernel and G's graph
// launch). cudablame's kernel list of the graph is cut at 1,024 fills, so the
// graph "may run" check_kernel; audit::check_kernel has the right base name
// but another namespace (the printed name is qualified). Neither is proven:
// "one of these 2 ops", never exact, the graph launch among them (named
// "graph: fill" from its kept list). Before issue 19 this ended `exact` on
// the healthy audit::check_kernel.
//
// Expected: "sample-error: cudaErrorAssert at cudaDeviceSynchronize() ...",
// exit 1.
#include <cassert>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void fill(float* x, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) x[i] = 1.0f;
}

namespace pipeline {
// The culprit: checks each index against n.
__global__ void check_kernel(const int* idx, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) {
        int j = idx[i];
        assert(j < n);
    }
}
}  // namespace pipeline

namespace audit {
// Healthy, same name: checks nothing but takes `ns` of GPU time.
__global__ void check_kernel(const int* idx, int n, long long ns) {
    const unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < ns) __nanosleep(1000);
    if (idx[0] > n) printf("never\n");
}
}  // namespace audit

constexpr int kFills = 1029;  // + check_kernel: 1,030 kernel nodes

__attribute__((noinline)) cudaError_t capture_long_graph(cudaStream_t g, const int* idx, float* out,
                                                         int n, int m, cudaGraphExec_t* exec) {
    cudaGraph_t graph;
    cudaError_t e = cudaStreamBeginCapture(g, cudaStreamCaptureModeGlobal);
    if (e != cudaSuccess) return e;
    for (int k = 0; k < kFills; ++k) fill<<<1, 64, 0, g>>>(out, m);
    pipeline::check_kernel<<<1, 64, 0, g>>>(idx, n, m);
    e = cudaStreamEndCapture(g, &graph);
    if (e != cudaSuccess) return e;
    return cudaGraphInstantiate(exec, graph, 0);
}

__attribute__((noinline)) cudaError_t launch_audit(cudaStream_t a, const int* idx, int n) {
    audit::check_kernel<<<1, 1, 0, a>>>(idx, n, 300LL * 1000 * 1000);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t replay(cudaGraphExec_t exec, cudaStream_t g) {
    cudaError_t e = cudaGraphLaunch(exec, g);
    __asm__ volatile("" ::: "memory");  // keeps this frame: no tail call into cudaGraphLaunch
    return e;
}

int main() {
    const int n = 256, m = 64;
    int host_idx[m];
    for (int i = 0; i < m; ++i) host_idx[i] = (i * 7) % n;
    host_idx[41] = n;  // BUG: one past the end
    int* idx = nullptr;
    float* out = nullptr;
    cudaStream_t a, g;
    cudaGraphExec_t exec;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&g, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&idx, sizeof(host_idx)));
    CHECK(cudaMalloc(&out, m * sizeof(float)));
    CHECK(cudaMemcpy(idx, host_idx, sizeof(host_idx), cudaMemcpyHostToDevice));
    CHECK(capture_long_graph(g, idx, out, n, m, &exec));
    CHECK(launch_audit(a, idx, n));
    CHECK(replay(exec, g));
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
