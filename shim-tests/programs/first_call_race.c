/*
 * Threads making their first hooked call at once (issue 19 item 1). Each round forks a child
 * (a fresh cudablame state, as in a new process, without the cost of exec): in the child,
 * THREADS threads wait at a barrier, then each calls cuCtxSynchronize once (linked -lcuda:
 * cudablame's export, whose first call builds the driver table). The parent counts children
 * that did not exit 0 and prints `rounds=R crashed=C`.
 *
 * usage: first_call_race [rounds] [threads]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda_min.h"

static pthread_barrier_t barrier;

static void *first_call(void *arg) {
    (void)arg;
    pthread_barrier_wait(&barrier);
    /* Before cuInit the real and the fake driver return CUDA_ERROR_NOT_INITIALIZED (3). */
    CUresult rc = cuCtxSynchronize();
    return (void *)(long)rc;
}

static int child(int threads) {
    pthread_t t[64];
    pthread_barrier_init(&barrier, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, first_call, NULL) != 0) return 2;
    int wrong = 0;
    for (int i = 0; i < threads; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        if ((long)rc != CUDA_ERROR_NOT_INITIALIZED) wrong++;
    }
    return wrong ? 3 : 0;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    int threads = argc > 2 ? atoi(argv[2]) : 8;
    if (threads < 1 || threads > 64) threads = 8;
    int crashed = 0, failed = 0;
    for (int r = 0; r < rounds; r++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 2; }
        if (pid == 0) _exit(child(threads));
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st)) crashed++;
        else if (WEXITSTATUS(st) != 0) failed++;
    }
    printf("rounds=%d crashed=%d failed=%d\n", rounds, crashed, failed);
    return crashed || failed ? 1 : 0;
}
