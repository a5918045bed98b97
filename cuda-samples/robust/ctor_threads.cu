// ctor_threads.cu (issue 19 item 2; scripts/gpu-robust.sh): a CUDA program that, with CUDA in
// use, dlopens libctor_threads.so (argv[1], see ctor_threads_lib.cu) whose constructor waits
// for threads, then uses CUDA again. Prints "ctor_result=42 cuda=ok"; must finish within 20 s.
//
// Build: nvcc -arch=sm_90 -o ctor_threads ctor_threads.cu -ldl
#include <cstdio>
#include <dlfcn.h>

#include "../check.h"

__global__ void touch(int* p) { p[threadIdx.x] = threadIdx.x; }

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    int* d = nullptr;
    CHECK(cudaMalloc(&d, 32 * sizeof(int)));
    touch<<<1, 32>>>(d);
    CHECK(cudaDeviceSynchronize());
    void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen_failed=%s\n", dlerror());
        return 3;
    }
    int* r = (int*)dlsym(h, "ctor_result");
    touch<<<1, 32>>>(d);
    CHECK(cudaDeviceSynchronize());
    printf("ctor_result=%d cuda=ok\n", r ? *r : -2);
    return r && *r == 42 ? 0 : 1;
}
