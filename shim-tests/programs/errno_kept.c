/* errno_kept.c: what a program reads in errno around hooked calls (transparency.rs,
 * `errno_is_the_programs_own_around_every_call`). errno is set to 4242 before each call and
 * printed after it: a call that does not touch errno leaves 4242, with or without cudablame.
 * The last synchronization returns the sticky error, whose report cudablame writes (files, a
 * folder check, stderr): its errno must be the driver's too. Also prints errno at `main` (ISO C:
 * 0; cudablame's constructors read the working folder and /sys), and what `dlerror` says after
 * the reporting call (nothing: cudablame's own failed symbol lookups must leave no message).
 * Usage: errno_kept   (linked with -lcuda; prints NAME_errno=N and NAME_rc=N lines; exit 0) */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
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

int main(void) {
    printf("main_errno=%d\n", errno);
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
