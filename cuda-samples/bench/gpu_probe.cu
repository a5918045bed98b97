// gpu_probe.cu: GPU time per op, and how far the host can run ahead (benchmark, not a test; issue
// 21). Used by scripts/bench.sh (part `gpu`) with and without cudablame.
//   gpu_probe [N] [REPS]
// GPU time per op: a ~50 ms spin kernel blocks the stream, then an event, N kernels and a second
// event are enqueued (the host has enqueued everything before the GPU starts them, so the GPU
// runs them back to back and whatever cudablame enqueues between them shows as GPU time); GPU
// time per op = elapsed time between the two events / N. For a tiny kernel (1 block of 32 threads)
// and a 1M-element kernel (y = a*x + y over 2^20 floats), on the legacy default stream (where
// PyTorch launches) and on a created non-blocking stream: the median over REPS repetitions,
//   gpu_<tiny|1m>_<legacy|nonblocking>_us=<µs per op>
// Queue depth: behind a ~300 ms spin kernel on a non-blocking stream, tiny kernels are launched
// until one launch takes over 2 ms (the driver's queue was full and the host waited):
//   queue_depth=<launches enqueued before that one> (at most 4000)
// Every CUDA call is checked: on failure it prints the error and exits 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

__global__ void tiny_kernel(float *out) {
    if (threadIdx.x == 0) out[0] += 1.0f;
}

__global__ void saxpy_kernel(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void spin_kernel(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

static void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "gpu_probe: %s failed: %s (%d): %s\n", what, cudaGetErrorName(e), (int)e,
                cudaGetErrorString(e));
        exit(1);
    }
}

static double now_us() {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

static const int kElems = 1 << 20;

// µs of GPU time per op of `n` kernels (`big`: the 1M-element kernel) queued behind a spin kernel.
static double per_op_us(cudaStream_t s, bool big, int n, long long spin_cycles, float *x, float *y) {
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "cudaEventCreate");
    check(cudaEventCreate(&e1), "cudaEventCreate");
    spin_kernel<<<1, 1, 0, s>>>(spin_cycles);
    check(cudaEventRecord(e0, s), "cudaEventRecord");
    for (int i = 0; i < n; i++) {
        if (big)
            saxpy_kernel<<<kElems / 256, 256, 0, s>>>(kElems, 1.0001f, x, y);
        else
            tiny_kernel<<<1, 32, 0, s>>>(y);
    }
    check(cudaEventRecord(e1, s), "cudaEventRecord");
    check(cudaGetLastError(), "kernel launch");
    check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    check(cudaEventDestroy(e0), "cudaEventDestroy");
    check(cudaEventDestroy(e1), "cudaEventDestroy");
    return ms * 1000.0 / n;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 400;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    if (n <= 0 || n > 900 || reps <= 0) {
        fprintf(stderr, "usage: gpu_probe [N (1..900, below the driver's queue depth)] [REPS]\n");
        return 2;
    }
    int khz = 0;
    check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "cudaDeviceGetAttribute");
    long long ms_cycles = (long long)khz;  // cycles per ms
    float *x, *y;
    check(cudaMalloc(&x, kElems * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(&y, kElems * sizeof(float)), "cudaMalloc");
    check(cudaMemset(x, 0, kElems * sizeof(float)), "cudaMemset");
    check(cudaMemset(y, 0, kElems * sizeof(float)), "cudaMemset");
    cudaStream_t nb;
    check(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    // Warm-up: module load, first launches.
    per_op_us(nb, false, 50, ms_cycles, x, y);
    per_op_us(nb, true, 50, ms_cycles, x, y);
    per_op_us(cudaStreamLegacy, false, 50, ms_cycles, x, y);

    struct Case {
        const char *name;
        cudaStream_t s;
        bool big;
        std::vector<double> us;
    };
    std::vector<Case> cases = {{"tiny_legacy", cudaStreamLegacy, false, {}},
                               {"tiny_nonblocking", nb, false, {}},
                               {"1m_legacy", cudaStreamLegacy, true, {}},
                               {"1m_nonblocking", nb, true, {}}};
    for (int r = 0; r < reps; r++)
        for (auto &c : cases) c.us.push_back(per_op_us(c.s, c.big, n, 50 * ms_cycles, x, y));
    for (auto &c : cases) printf("gpu_%s_us=%.3f\n", c.name, median(c.us));

    // Queue depth behind a blocked stream.
    spin_kernel<<<1, 1, 0, nb>>>(300 * ms_cycles);
    int depth = 0;
    for (; depth < 4000; depth++) {
        double t0 = now_us();
        tiny_kernel<<<1, 32, 0, nb>>>(y);
        if (now_us() - t0 > 2000) break;
    }
    check(cudaGetLastError(), "kernel launch (queue depth)");
    check(cudaStreamSynchronize(nb), "cudaStreamSynchronize");
    printf("queue_depth=%d\n", depth);
    printf("gpu_n=%d gpu_reps=%d\n", n, reps);
    check(cudaStreamDestroy(nb), "cudaStreamDestroy");
    check(cudaFree(x), "cudaFree");
    check(cudaFree(y), "cudaFree");
    return 0;
}
