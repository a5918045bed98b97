// std_thread_fnptr.cu (issue 19 item 3; scripts/gpu-robust.sh): a kernel launched from
// `std::thread t(producer, d)`, where producer's last statement is the faulting launch (a tail
// call at -O2: no program frame is left on the launch stack). The report must say what the
// thread ran: culprit.op.thread_start starts with "std::thread running producer(int*)" (before
// the fix: "std::thread running void (*)(int*), int*").
//
// Build: nvcc -arch=sm_90 -O2 -o std_thread_fnptr std_thread_fnptr.cu
#include <cstdio>
#include <thread>

#include "../check.h"

__global__ void scatter(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i * 1024 * 1024] = i;  // far past the 1024-int buffer: illegal address
}

void producer(int* d) { scatter<<<4, 256>>>(d, 1024); }

int main() {
    int* d = nullptr;
    CHECK(cudaMalloc(&d, 1024 * sizeof(int)));
    std::thread t(producer, d);
    t.join();
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
