/* errno_kept.c: what a program reads in errno around hooked calls (transparency.rs,
 * `errno_is_the_programs_own_around_every_call`). errno is set to 4242 before each call and
 * printed after it: a call that does not touch errno leaves 4242, with or without cudablame.
 * The last synchronization returns the sticky error, whose report cudablame writes (files, a
 * folder check, stderr): its errno must be the driver's too. Also prints errno at `main` (ISO C:
 * 0; cudablame's constructors read the working folder and /sys), and what `dlerror` says after
 * the reporting call (nothing: cudablame's own failed symbol lookups must leave no message).
 * With FAKE_CUDA_ERRNO=N the simulated driver leaves N in errno on every call: the program must
 * read N after each, with or without cudablame.
 * Usage: errno_kept [paused | RUNTIME_PATH]   (linked with -lcuda; prints NAME_errno=N and
 * NAME_rc=N lines; exit 0) */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cuda_min.h"
#include "check.h"

static const char *MODULE =
    "// fake: ok\n"
    "// fake: bad fault=700 delay_us=20000\n";

#define STEP(name, call)                                 \
    do {                                                 \
        errno = 4242;                                    \
        CUresult rc_ = (call);                           \
        int e_ = errno;                                  \
        printf(name "_rc=%u\n" name "_errno=%d\n", rc_, e_); \
    } while (0)

int main(int argc, char **argv) {
    printf("main_errno=%d\n", errno);
    /* "paused": cudablame paused before the first call, where it has one (a benchmark's
     * switch; every call then takes the hook's general path). */
    int (*pause)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudablame_pause");
    if (argc > 1 && !strcmp(argv[1], "paused") && pause) pause(1);
    /* A path: a CUDA runtime opened RTLD_LOCAL (as CuPy's modules do), which cudablame's lookup
     * of the runtime's error strings does not find: that lookup's message must not stay. */
    if (argc > 1 && strchr(argv[1], '/') && !dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
        printf("setup_failed=%s\n", dlerror());
        return 3;
    }
    CUfunction ok, bad;
    CUstream s = ok_and_bad(MODULE, &ok, &bad);
    const char *text;
    STEP("launch", cuLaunchKernel(ok, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    STEP("sync", cuStreamSynchronize(s));
    STEP("launch_bad", cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    dlerror(); /* no message pending */
    STEP("fault", cuStreamSynchronize(s));
    const char *message = dlerror();
    printf("fault_dlerror=%s\n", message ? message : "none");
    STEP("error_string", cuGetErrorString(700, &text));
    STEP("after", cuCtxSynchronize());
    return 0;
}
