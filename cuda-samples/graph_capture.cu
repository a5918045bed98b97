// EXPECT kernel=graph_scatter site=launch_graph error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuStreamSynchronize
//
// graph_capture.cu: the faulting kernel runs inside a CUDA graph built by
// stream capture (the way CUDA-graph users, PyTorch's CUDAGraph included,
// build their graphs).
//
// Timeline (one non-blocking stream s):
//   cudaStreamBeginCapture(s)                 (global mode)
//     graph_prepare, graph_scatter, graph_finish on s   -> captured, not run
//   cudaStreamEndCapture(s) -> graph; cudaGraphInstantiate -> exec
//   launch_graph(exec, s)     cudaGraphLaunch   -> CULPRIT op (kind "graph"):
//                                                  its 2nd kernel, graph_scatter,
//                                                  writes through 0x10 -> 700
//   cudaStreamSynchronize(s)                    -> REPORTS (cuStreamSynchronize)
//
// Kernels launched during capture do not run then; the shim does not record
// them as ops. The culprit op is the graph launch (kind "graph", site=
// launch_graph), the only unfinished op: exact.
//
// kernel=graph_scatter REQUIRES GRAPH-KERNEL NAMING: a graph op has no
// kernel handle of its own. cudablame is being extended to record the
// captured kernels and to name a graph launch by what it runs
// (op.kernel = "graph: graph_prepare, graph_scatter, graph_finish", with
// the captured ops under op.graph); until that lands this case fails on the
// kernel= check only. Naming the faulting node itself is impossible
// (markers only bracket the whole graph), so the listing is what passes.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaStreamSynchronize(s)
// ...", exit 1.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void graph_prepare(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = float(i);
}

__global__ void graph_scatter(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + 1.0f;
}

__global__ void graph_finish(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= 0.5f;
}

// Records the three kernels into the graph being captured on s.
__attribute__((noinline)) cudaError_t capture_step(cudaStream_t s, float* x, int n) {
    int blocks = (n + 255) / 256;
    // BUG: the output buffer of the middle node was never allocated.
    float* out = reinterpret_cast<float*>(uintptr_t(0x10));
    graph_prepare<<<blocks, 256, 0, s>>>(x, n);
    graph_scatter<<<blocks, 256, 0, s>>>(out, x, n);
    graph_finish<<<blocks, 256, 0, s>>>(x, n);
    return cudaGetLastError();
}

__attribute__((noinline)) cudaError_t launch_graph(cudaGraphExec_t exec, cudaStream_t s) {
    cudaError_t e = cudaGraphLaunch(exec, s);
    if (e != cudaSuccess) fprintf(stderr, "launch_graph: %s\n", cudaGetErrorName(e));
    return e;
}

int main() {
    const int n = 4096;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* x = nullptr;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaDeviceSynchronize());

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(capture_step(s, x, n));
    CHECK(cudaStreamEndCapture(s, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));

    CHECK(launch_graph(exec, s));
    CHECK(cudaStreamSynchronize(s));
    printf("unexpected: no error\n");
    return 0;
}
