// ctor_threads_lib.cu (issue 19 item 2; scripts/gpu-robust.sh): a library whose constructor,
// running inside dlopen with glibc's loader lock held, starts a worker and waits for it while
// the worker creates a thread. Before the fix cudablame's pthread_create hook called dladdr
// (which waits for the loader lock) in the worker: the program hung forever inside dlopen.
//
// Build: nvcc -arch=sm_90 -shared -Xcompiler -fPIC -o libctor_threads.so ctor_threads_lib.cu
#include <pthread.h>

static void* grandchild(void* arg) { return arg; }

static void* worker(void* arg) {
    pthread_t t;
    if (pthread_create(&t, nullptr, grandchild, arg) != 0) return nullptr;
    void* out = nullptr;
    pthread_join(t, &out);
    return out;
}

extern "C" {
int ctor_result = 0;
}

__attribute__((constructor)) static void start_and_wait() {
    static int token = 42;
    pthread_t t;
    if (pthread_create(&t, nullptr, worker, &token) != 0) return;
    void* out = nullptr;
    pthread_join(t, &out);
    ctor_result = out == &token ? 42 : -1;
}
