// first_call_race.cu (issue 19 item 1; scripts/gpu-robust.sh): threads making their first CUDA
// call at once. Each round forks a child (fresh cudablame and driver state, no CUDA in the
// parent); in the child 8 threads wait at a barrier, then each calls cuInit and cuDeviceGet
// (linked -lcuda: cudablame's exports, whose first call builds cudablame's driver table). Before
// the fix every such thread rebuilt the table and re-patched libcuda's read-only import slots:
// a few SIGSEGVs in a few hundred rounds. Prints "rounds=R crashed=C failed=F"; exit 0 iff none.
//
// Build: nvcc -arch=sm_90 -o first_call_race first_call_race.cu -lcuda -lpthread
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_barrier_t barrier;

static void* first_call(void*) {
    pthread_barrier_wait(&barrier);
    CUdevice dev = -1;
    CUresult rc = cuInit(0);
    if (rc == CUDA_SUCCESS) rc = cuDeviceGet(&dev, 0);
    return (void*)(long)rc;
}

static int child(int threads) {
    pthread_t t[64];
    pthread_barrier_init(&barrier, nullptr, (unsigned)threads);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], nullptr, first_call, nullptr) != 0) return 2;
    int wrong = 0;
    for (int i = 0; i < threads; i++) {
        void* rc = nullptr;
        pthread_join(t[i], &rc);
        if ((long)rc != CUDA_SUCCESS) wrong++;
    }
    return wrong ? 3 : 0;
}

int main(int argc, char** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    int threads = argc > 2 ? atoi(argv[2]) : 8;
    if (threads < 1 || threads > 64) threads = 8;
    int crashed = 0, failed = 0;
    for (int r = 0; r < rounds; r++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) _exit(child(threads));
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st))
            crashed++;
        else if (WEXITSTATUS(st) != 0)
            failed++;
    }
    printf("rounds=%d crashed=%d failed=%d\n", rounds, crashed, failed);
    return crashed || failed ? 1 : 0;
}
