// launch_loop.cu: host cost per kernel launch (benchmark, not a test).
// Launches N empty kernels on one stream and prints the host time per launch in µs, after a
// warm-up, then synchronizes. Used by scripts/bench.sh side by side with and without cudablame.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void empty_kernel() {}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int i = 0; i < 1000; i++) empty_kernel<<<1, 32, 0, s>>>();
    cudaStreamSynchronize(s);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; i++) empty_kernel<<<1, 32, 0, s>>>();
    auto t1 = std::chrono::steady_clock::now();
    cudaError_t e = cudaStreamSynchronize(s);
    double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
    printf("launch_us=%.3f err=%d\n", us, (int)e);
    return e == cudaSuccess ? 0 : 1;
}
