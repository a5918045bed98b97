// graph_markers.cu: can progress markers live inside CUDA graphs, and what do they cost per
// replay? (issue 15, item 4; an experiment, not a test; no cudablame involved).
//   nvcc -O2 -arch=sm_90 -o graph_markers cuda-samples/bench/graph_markers.cu -lcuda
//   graph_markers [KERNELS] [REPLAYS]     (default 64 kernels, 300 replays)
// Two graphs of the same chain of KERNELS small kernels are captured from a stream: A as is, B
// with a stream memory write (cuStreamWriteValue64 of i+1 into pinned device-mapped host memory)
// after kernel i, which capture turns into a memory-op node between kernel i and kernel i+1:
// the markers cudablame would add (its own capture records ops and adds none today).
// Prints:
//   replay_us_plain=<median µs per replay of A> replay_us_markers=<of B> added_per_node_us=<...>
//   results_equal=<1 if A and B compute the same buffer>
//   fault_slot=<marker value after kernel FAULT_AT of a third graph C (B's shape) stores to 0x10>
//   fault_expected=<FAULT_AT> exact=<1 if equal> fault_error=<the sync's error name>
// Replays are timed one at a time (launch + synchronize), in alternating order, after warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "../check.h"

__global__ void step(float* buf, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] = buf[i] * a + 1.0f;
}

__global__ void bad_step(float* buf, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) reinterpret_cast<float*>(0x10)[i] = buf[i];
}

static const int kN = 1 << 16;

// Captures the chain into an executable graph; with `slot`, a marker after each kernel; kernel
// `fault_at` (or none, -1) is the faulting one.
static int capture(cudaStream_t s, float* buf, int kernels, CUdeviceptr slot, int fault_at,
                   cudaGraphExec_t* exec) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < kernels; i++) {
        if (i == fault_at) {
            bad_step<<<kN / 256, 256, 0, s>>>(buf, kN);
        } else {
            step<<<kN / 256, 256, 0, s>>>(buf, kN, 1.0001f);
        }
        if (slot) {
            CU_CHECK(cuStreamWriteValue64((CUstream)s, slot, (cuuint64_t)(i + 1), 0));
        }
    }
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(exec, g, 0));
    return 0;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    int kernels = argc > 1 ? atoi(argv[1]) : 64;
    int replays = argc > 2 ? atoi(argv[2]) : 300;
    int fault_at = kernels * 5 / 8;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *a_buf, *b_buf;
    CHECK(cudaMalloc(&a_buf, kN * sizeof(float)));
    CHECK(cudaMalloc(&b_buf, kN * sizeof(float)));
    CHECK(cudaMemset(a_buf, 0, kN * sizeof(float)));
    CHECK(cudaMemset(b_buf, 0, kN * sizeof(float)));
    void* host = nullptr;
    CU_CHECK(cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    volatile unsigned long long* slot_host = (volatile unsigned long long*)host;
    *slot_host = 0;
    CUdeviceptr slot = 0;
    CU_CHECK(cuMemHostGetDevicePointer(&slot, host, 0));

    cudaGraphExec_t plain, marked;
    if (capture(s, a_buf, kernels, 0, -1, &plain)) return 1;
    if (capture(s, b_buf, kernels, slot, -1, &marked)) return 1;
    for (int w = 0; w < 20; w++) {
        CHECK(cudaGraphLaunch(plain, s));
        CHECK(cudaGraphLaunch(marked, s));
    }
    CHECK(cudaStreamSynchronize(s));
    std::vector<double> tp, tm;
    for (int r = 0; r < replays; r++) {
        for (int k = 0; k < 2; k++) {
            bool with = (r + k) % 2;
            auto t0 = std::chrono::steady_clock::now();
            CHECK(cudaGraphLaunch(with ? marked : plain, s));
            CHECK(cudaStreamSynchronize(s));
            double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
            (with ? tm : tp).push_back(us);
        }
    }
    std::vector<float> ha(kN), hb(kN);
    CHECK(cudaMemcpy(ha.data(), a_buf, kN * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hb.data(), b_buf, kN * sizeof(float), cudaMemcpyDeviceToHost));
    double mp = median(tp), mm = median(tm);
    printf("kernels=%d replays=%d\n", kernels, replays);
    printf("replay_us_plain=%.2f replay_us_markers=%.2f added_per_node_us=%.3f\n", mp, mm,
           (mm - mp) / kernels);
    printf("results_equal=%d marker_after_replay=%llu\n", ha == hb ? 1 : 0, *slot_host);

    // The fault: a graph of B's shape whose kernel fault_at stores to 0x10.
    cudaGraphExec_t faulty;
    *slot_host = 0;
    if (capture(s, b_buf, kernels, slot, fault_at, &faulty)) return 1;
    CHECK(cudaGraphLaunch(faulty, s));
    cudaError_t e = cudaStreamSynchronize(s);
    printf("fault_error=%s fault_slot=%llu fault_expected=%d exact=%d\n", cudaGetErrorName(e),
           *slot_host, fault_at, *slot_host == (unsigned long long)fault_at ? 1 : 0);
    return 0;
}
