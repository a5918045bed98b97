// launch_loop.cu: host cost per kernel launch (benchmark, not a test).
//   launch_loop [N] [host]
// Default mode: N empty kernels back to back on one stream; prints µs per launch (this can be
// bound by the GPU's throughput for tiny kernels, not the host).
// "host" mode: the stream is first blocked by a ~2 ms spin kernel, then 256 empty kernels are
// launched while it spins (enqueue cost only, never waiting for queue space), repeated until N
// launches; prints host µs per launch. Used by scripts/bench.sh with and without cudablame.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void empty_kernel() {}

__global__ void spin_kernel(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    bool host = argc > 2 && !strcmp(argv[2], "host");
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 32, 0, s>>>();
    cudaStreamSynchronize(s);
    double total_us = 0;
    if (host) {
        const int batch = 256;
        for (int done = 0; done < n; done += batch) {
            spin_kernel<<<1, 1, 0, s>>>(4000000);  // ~2 ms at ~2 GHz
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < batch; i++) empty_kernel<<<1, 32, 0, s>>>();
            auto t1 = std::chrono::steady_clock::now();
            total_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
            cudaStreamSynchronize(s);
        }
        n = (n + batch - 1) / batch * batch;
    } else {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; i++) empty_kernel<<<1, 32, 0, s>>>();
        auto t1 = std::chrono::steady_clock::now();
        total_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    }
    cudaError_t e = cudaStreamSynchronize(s);
    printf("launch_us=%.3f err=%d\n", total_us / n, (int)e);
    return e == cudaSuccess ? 0 : 1;
}
