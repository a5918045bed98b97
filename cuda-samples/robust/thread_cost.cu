// thread_cost.cu (issue 19 item 3; scripts/gpu-robust.sh): thread creation cost in a CUDA
// program. After a first CUDA call (so cudablame is fully initialised), creates argv[2] threads
// one after another (create + join) through `spawn_threads` of the library argv[1] (generated
// by the script: tens of thousands of symbols; the start routine lies in it, so a dladdr of it
// scans that symbol table), and prints "ns_per_thread=N". Before the fix the pthread_create
// hook called dladdr up to four times per thread: 17 -> 680 us per thread with 60k symbols.
//
// Build: nvcc -arch=sm_90 -o thread_cost thread_cost.cu -ldl
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <dlfcn.h>

#include "../check.h"

int main(int argc, char** argv) {
    if (argc < 3) return 2;
    CHECK(cudaFree(nullptr));
    void* h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        printf("dlopen_failed=%s\n", dlerror());
        return 3;
    }
    int (*spawn)(int) = (int (*)(int))dlsym(h, "spawn_threads");
    if (!spawn) return 4;
    int n = atoi(argv[2]);
    spawn(10);  // warm-up
    timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int ok = spawn(n);
    clock_gettime(CLOCK_MONOTONIC, &b);
    long long ns = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    printf("ns_per_thread=%lld\n", ns / (n > 0 ? n : 1));
    return ok == n ? 0 : 1;
}
