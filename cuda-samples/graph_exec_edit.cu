// EXPECT kernel=graph_fill error=CUDA_ERROR_ASSERT confidence=oneof window=2 among=graph_check reporter=cuStreamSynchronize|cuCtxSynchronize assert=graph_check
//
// graph_exec_edit.cu: an executable graph whose kernel node was changed after
// instantiation (cudaGraphExecKernelNodeSetParams, CUDA Runtime API "Graph
// Management"): the graph was captured running graph_fill, but the launch runs
// graph_check, which asserts. Another stream runs a healthy graph_check at the
// same time.
//
// Timeline:
//   capture on g: graph_fill           -> graph; instantiate -> exec
//   exec's node set to graph_check on bad indices (the capture list is stale)
//   stream a: graph_check (good indices, spins 300 ms, never asserts)
//   cudaGraphLaunch(exec, g)           -> CULPRIT: its node asserts -> 710
//   cudaStreamSynchronize(g)           -> REPORTS
//
// The device-side assert names graph_check. By the graph's captured list
// ([graph_fill]) only stream a's op runs a graph_check, so a table that
// missed the edit would say "graph_check on stream a, exact": the healthy
// one. cudablame marks the executable graph changed after capture and says
// "one of these 2 ops" (the graph launch, shown by what was captured, and
// stream a's graph_check). The fake-driver twin is shim-tests/tests/graphs.rs
// (exec_edit).
//
// Expected: "sample-error: cudaErrorAssert at cudaStreamSynchronize(g) ...",
// exit 1.
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

#include "check.h"

__global__ void graph_fill(int* idx, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) idx[i] = i;
}

// Spins spin_ns, then checks every index against n.
__global__ void graph_check(const int* idx, int n, long long spin_ns) {
    unsigned long long t0 = global_ns();
    while ((long long)(global_ns() - t0) < spin_ns) __nanosleep(1000);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(idx[i] < n);
}

__global__ void make_bad(int* idx, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) idx[i] = n + i;
}

int main() {
    const int n = 256;
    cudaStream_t a, g;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&g, cudaStreamNonBlocking));
    int *good = nullptr, *bad = nullptr;
    CHECK(cudaMalloc(&good, n * sizeof(int)));
    CHECK(cudaMalloc(&bad, n * sizeof(int)));
    graph_fill<<<1, n>>>(good, n);
    make_bad<<<1, n>>>(bad, n);
    CHECK(cudaDeviceSynchronize());

    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(g, cudaStreamCaptureModeGlobal));
    graph_fill<<<1, n, 0, g>>>(bad, 0);  // n = 0: writes nothing
    CHECK(cudaGetLastError());
    CHECK(cudaStreamEndCapture(g, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));

    // BUG: the executable graph's node now runs graph_check on the bad indices.
    cudaGraphNode_t node;
    size_t count = 1;
    CHECK(cudaGraphGetNodes(graph, &node, &count));
    const int* bad_arg = bad;
    int n_arg = n;
    long long no_spin = 0;
    void* args[] = {&bad_arg, &n_arg, &no_spin};
    cudaKernelNodeParams p = {};
    p.func = reinterpret_cast<void*>(graph_check);
    p.gridDim = dim3(1);
    p.blockDim = dim3(n);
    p.kernelParams = args;
    CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));

    graph_check<<<1, n, 0, a>>>(good, n, 300LL * 1000 * 1000);  // healthy, still running
    CHECK(cudaGetLastError());
    CHECK(cudaGraphLaunch(exec, g));
    CHECK(cudaStreamSynchronize(g));
    printf("unexpected: no error\n");
    return 0;
}
