/*
 * A library whose constructor (running inside dlopen, with glibc's loader lock held) starts a
 * worker and waits for it, while the worker itself creates a thread (issue 19 item 2). Loads
 * fine without cudablame; before the fix it hung forever with it: the pthread_create hook called
 * dladdr, which waits for the loader lock.
 */
#include <pthread.h>
#include <stdio.h>

static void *grandchild(void *arg) { return arg; }

static void *worker(void *arg) {
    pthread_t t;
    if (pthread_create(&t, NULL, grandchild, arg) != 0) return NULL;
    void *out = NULL;
    pthread_join(t, &out);
    return out;
}

int ctor_result = 0;

__attribute__((constructor)) static void start_and_wait(void) {
    pthread_t t;
    static int token = 42;
    if (pthread_create(&t, NULL, worker, &token) != 0) return;
    void *out = NULL;
    pthread_join(t, &out);
    ctor_result = out == &token ? 42 : -1;
}
