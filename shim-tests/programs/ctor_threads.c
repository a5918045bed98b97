/* Loads the library of ctor_threads_lib.c (argv[1]) with dlopen and prints what its
 * constructor's threads returned: `ctor_result=42`. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen_failed=%s\n", dlerror()); return 3; }
    int *r = (int *)dlsym(h, "ctor_result");
    printf("ctor_result=%d\n", r ? *r : -2);
    return r && *r == 42 ? 0 : 1;
}
