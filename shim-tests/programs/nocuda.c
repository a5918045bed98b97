/* A program without CUDA that still touches what the shim interposes: dlsym with every kind of
 * handle, a failed dlopen of the driver, threads, fork. Prints what it found; exits with 5. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *work(void *arg) { return arg; }

int main(void) {
    printf("default_cuInit=%s\n", dlsym(RTLD_DEFAULT, "cuInit") ? "found" : "missing");
    printf("default_cuLaunchKernel=%s\n", dlsym(RTLD_DEFAULT, "cuLaunchKernel") ? "found" : "missing");
    printf("default_cudaGetDriverEntryPoint=%s\n",
           dlsym(RTLD_DEFAULT, "cudaGetDriverEntryPoint") ? "found" : "missing");
    printf("next_malloc=%s\n", dlsym(RTLD_NEXT, "malloc") ? "found" : "missing");
    printf("default_printf=%s\n", dlsym(RTLD_DEFAULT, "printf") == (void *)printf ? "same" : "other");
    void *self = dlopen(NULL, RTLD_NOW);
    printf("self_cuLaunchKernel=%s\n", dlsym(self, "cuLaunchKernel") ? "found" : "missing");
    printf("self_getpid=%s\n", dlsym(self, "getpid") ? "found" : "missing");
    printf("dlopen_driver=%s\n", dlopen("libcuda.so.1", RTLD_NOW) ? "loaded" : "missing");
    pthread_t t;
    pthread_create(&t, NULL, work, NULL);
    pthread_join(t, NULL);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) _exit(9);
    int status;
    waitpid(child, &status, 0);
    printf("child=%d\n", WEXITSTATUS(status));
    return 5;
}
