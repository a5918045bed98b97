/* two_runtimes.c: two CUDA runtime versions in one process (process_life.rs,
 * `a_library_with_its_own_runtime_keeps_it`), as a framework's `libcudart.so.12` in the global
 * scope and an extension module built for `libcudart.so.11.0`, loaded RTLD_LOCAL. Built four ways
 * from this one file:
 *   -DRUNTIME=11 / -DRUNTIME=12  stand-in runtimes whose cudaGetDriverEntryPoint prints which one
 *                 ran (11: three parameters; 12: a fourth, an out parameter it writes);
 *   -DEXTENSION   the extension, linked with the stand-in libcudart.so.11.0: ext_entry() calls it;
 *   -DPROBE       libprobe.so, linked with libcudart.so.12: probe() looks up cuLaunchKernel
 *                 with dlsym(RTLD_DEFAULT) and calls cudaGetDriverEntryPoint;
 *   -DSTARTUP     a program linked with libprobe.so (loaded at startup, not by dlopen: its
 *                 link map was passed to dlsym as a handle, which has no search list yet:
 *                 SIGSEGV in the loader; a review), prints probe_rc=;
 *   -DTOOL        another preloaded tool wrapping cudaGetDriverEntryPoint (prints tool_called=1;
 *                 behind cudablame it must still be called, a review);
 *   (none)        the program: dlopens DIR/libcudart.so.12 RTLD_GLOBAL, DIR/libext11.so
 *                 RTLD_LOCAL (DIR: argv[1]) and calls ext_entry. Without cudablame the extension
 *                 binds to its own runtime 11; a lookup that searched the global scope first
 *                 called runtime 12's with a fourth argument never passed (a break-it review).
 * Prints `entry_point=runtime N` and exits 0. */
#include <dlfcn.h>
#include <stdio.h>

#if defined(RUNTIME)
#if RUNTIME == 11
int cudaGetDriverEntryPoint(const char *s, void **f, unsigned long long flags) {
    (void)s, (void)flags;
    if (f) *f = 0;
    printf("entry_point=runtime 11\n");
    return 500;
}
#else
int cudaGetDriverEntryPoint(const char *s, void **f, unsigned long long flags, int *status) {
    (void)s, (void)flags;
    if (f) *f = 0;
    if (status) *status = 0;
    printf("entry_point=runtime 12\n");
    return 500;
}
#endif
#elif defined(EXTENSION)
int cudaGetDriverEntryPoint(const char *, void **, unsigned long long);
int ext_entry(void) {
    void *f;
    return cudaGetDriverEntryPoint("cuInit", &f, 0);
}
#elif defined(PROBE)
int cudaGetDriverEntryPoint(const char *, void **, unsigned long long, int *);
/* A framework library linked at startup (DT_NEEDED) with runtime 12: it probes for a driver
 * function by name, then asks its runtime for an entry point. */
int probe(void) {
    void *f;
    int status;
    printf("probe_found=%d\n", dlsym(RTLD_DEFAULT, "cuLaunchKernel") != NULL);
    return cudaGetDriverEntryPoint("cuInit", &f, 0, &status);
}
#elif defined(TOOL)
#include <dlfcn.h>
/* Another LD_PRELOAD tool wrapping the runtime's cudaGetDriverEntryPoint the usual way. */
int cudaGetDriverEntryPoint(const char *s, void **f, unsigned long long flags, int *status) {
    static int (*next)(const char *, void **, unsigned long long, int *);
    if (!next) *(void **)&next = dlsym(RTLD_NEXT, "cudaGetDriverEntryPoint");
    printf("tool_called=1\n");
    return next(s, f, flags, status);
}
#elif defined(STARTUP)
int probe(void);
int main(void) {
    printf("probe_rc=%d\n", probe());
    return 0;
}
#else
int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libcudart.so.12", argc > 1 ? argv[1] : ".");
    void *global = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libext11.so", argc > 1 ? argv[1] : ".");
    void *ext = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!global || !ext) {
        printf("setup_failed=%s\n", dlerror());
        return 3;
    }
    int (*entry)(void) = (int (*)(void))dlsym(ext, "ext_entry");
    printf("ext_entry_rc=%d\n", entry());
    return 0;
}
#endif
