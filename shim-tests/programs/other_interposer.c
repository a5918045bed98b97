/* A second LD_PRELOAD interposer, like the tools users combine cudablame with: it wraps dlsym
 * (counting and forwarding to glibc's, found with dlvsym), getpid and cuInit, each finding the
 * next definition with dlsym(RTLD_NEXT, ...). If RTLD_NEXT were computed from the wrong object,
 * getpid would find itself and recurse until the stack overflows. At exit it prints its counts on
 * stderr: "other_interposer: dlsym=N getpid=N cuInit=N". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

static int dlsym_calls, getpid_calls, cuinit_calls;
static void *(*real_dlsym)(void *, const char *);

static void find_real_dlsym(void) {
    if (!real_dlsym) *(void **)&real_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym) *(void **)&real_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

void *dlsym(void *handle, const char *symbol) {
    find_real_dlsym();
    __atomic_add_fetch(&dlsym_calls, 1, __ATOMIC_RELAXED);
    return real_dlsym(handle, symbol);
}

pid_t getpid(void) {
    static pid_t (*next)(void);
    __atomic_add_fetch(&getpid_calls, 1, __ATOMIC_RELAXED);
    if (!next) *(void **)&next = dlsym(RTLD_NEXT, "getpid");
    return next();
}

unsigned cuInit(unsigned flags) {
    static unsigned (*next)(unsigned);
    __atomic_add_fetch(&cuinit_calls, 1, __ATOMIC_RELAXED);
    if (!next) *(void **)&next = dlsym(RTLD_NEXT, "cuInit");
    return next ? next(flags) : 3;
}

__attribute__((destructor)) static void counts(void) {
    fprintf(stderr, "other_interposer: dlsym=%d getpid=%d cuInit=%d\n", dlsym_calls, getpid_calls,
            cuinit_calls);
}
