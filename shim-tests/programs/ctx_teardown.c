/* A context that ends with a sticky error: cuCtxDestroy, cuDevicePrimaryCtxReset and the last
 * cuDevicePrimaryCtxRelease of a context whose kernel faulted return that error (700) and still
 * destroy the context, freeing its pinned memory. Then a new context is made on the same device
 * and used; run with FAKE_CUDA_REUSE_HANDLES=1 the fake driver gives it the destroyed context's
 * handle, and its first stream the destroyed context's stream handle (printed as ctx_reused=,
 * stream_reused=), so a stream record kept from the destroyed context would be found again.
 * Linked with -lcuda (the fake).
 *
 * Usage: ctx_teardown MODE     MODE: destroy | reset | release (how context A ends)
 *   Context A (destroy: created with cuCtxCreate; reset, release: device 0's primary context)
 *   runs, on a created stream sa: #1 quick, #2 quick, #3 bad_a (faults with 700 after 20 ms),
 *   after a quick kernel on its legacy stream; then A ends: end_rc= (the 700, returned to the
 *   program unchanged); ctx_a= and stream_a= are A's and sa's handles. Context B on device 0
 *   (created, or the primary context retained again) gets a created stream sb; quick kernels on
 *   sb and its legacy stream; healthy_sync_rc= (0).
 *   Then, destroy only, bad_b faults on sb: fault_sync_rc= (700), and B is destroyed:
 *   end_b_rc= (700, after the report of A's fault: no second report); a third context C (at
 *   the same handles again: ctx_reused_again=, stream_reused_again=) runs quick kernels:
 *   last_sync_rc= (0).
 *
 * Usage: ctx_teardown paused   A healthy context A runs 3 quick kernels on a created stream sa
 *   and one on its legacy stream (healthy_a_rc= of the synchronize, 0); then, with cudablame
 *   paused (`cudablame_pause`, when it is loaded; pause_found=), A is destroyed (end_rc=, 0) and
 *   cudablame resumed; a context B at A's handle (ctx_reused=, stream_reused=) runs 3 quick
 *   kernels on sb and bad_b (#4 on sb): fault_sync_rc= (700).
 * Exit status 0 (3: a setup call failed). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "cuda_min.h"
#include "check.h"

static const char *MODULE =
    "// fake: quick\n"
    "// fake: bad_a fault=700 delay_us=20000\n"
    "// fake: bad_b fault=700 delay_us=20000\n";

/* A context of device 0, current: created, or the primary context retained. */
static CUcontext make_context(int primary) {
    CUcontext c;
    if (primary) {
        check("retain", cuDevicePrimaryCtxRetain(&c, 0));
        check("set", cuCtxSetCurrent(c));
    } else {
        check("create", cuCtxCreate(&c, 0, 0));
    }
    return c;
}

/* A new context (primary or not) with MODULE loaded into `m` and one stream `s`; prints whether
 * the driver gave them the handles of `old` and `old_s` (`ctx_reusedSUFFIX=`,
 * `stream_reusedSUFFIX=`). */
static CUcontext fresh(int primary, CUcontext old, CUstream old_s, const char *suffix, CUmodule *m,
                       CUstream *s) {
    CUcontext c = make_context(primary);
    check("load", cuModuleLoadData(m, MODULE));
    check("stream", cuStreamCreate(s, 0));
    printf("ctx_reused%s=%d\nstream_reused%s=%d\n", suffix, c == old, suffix, *s == old_s);
    return c;
}

/* `ctx_teardown paused` (see the top). */
static int paused_teardown(void) {
    int (*pause_fn)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudablame_pause");
    printf("pause_found=%d\n", pause_fn != NULL);
    check("init", cuInit(0));
    CUmodule ma, mb;
    CUstream sa, sb;
    CUcontext a = fresh(0, NULL, NULL, "_first", &ma, &sa);
    CUfunction quick_a = get_function(ma, "quick");
    for (int i = 0; i < 3; i++) launch_checked(quick_a, sa);
    launch_checked(quick_a, NULL);
    printf("healthy_a_rc=%u\n", cuCtxSynchronize());
    if (pause_fn) pause_fn(1);
    printf("end_rc=%u\n", cuCtxDestroy(a));
    if (pause_fn) pause_fn(0);
    fresh(0, a, sa, "", &mb, &sb);
    CUfunction quick_b = get_function(mb, "quick");
    for (int i = 0; i < 3; i++) launch_checked(quick_b, sb);
    launch_checked(get_function(mb, "bad_b"), sb);
    printf("fault_sync_rc=%u\n", cuCtxSynchronize());
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "destroy";
    if (!strcmp(mode, "paused")) return paused_teardown();
    int primary = strcmp(mode, "destroy") != 0;
    if (primary && strcmp(mode, "reset") && strcmp(mode, "release")) {
        printf("unknown mode\n");
        return 2;
    }
    check("cuInit", cuInit(0));

    CUcontext a = make_context(primary);
    CUmodule ma;
    CUstream sa;
    check("load a", cuModuleLoadData(&ma, MODULE));
    check("stream a", cuStreamCreate(&sa, 0));
    CUfunction quick_a = get_function(ma, "quick");
    launch_checked(quick_a, NULL);
    launch_checked(quick_a, sa);
    launch_checked(quick_a, sa);
    launch_checked(get_function(ma, "bad_a"), sa);
    CUresult end;
    if (!strcmp(mode, "destroy"))
        end = cuCtxDestroy(a);
    else if (!strcmp(mode, "reset"))
        end = cuDevicePrimaryCtxReset(0);
    else
        end = cuDevicePrimaryCtxRelease(0);
    printf("ctx_a=%p\nstream_a=%p\nend_rc=%u\n", (void *)a, (void *)sa, end);

    CUmodule mb;
    CUstream sb;
    CUcontext b = fresh(primary, a, sa, "", &mb, &sb);
    CUfunction quick_b = get_function(mb, "quick");
    launch_checked(quick_b, sb);
    launch_checked(quick_b, NULL);
    launch_checked(quick_b, sb);
    printf("healthy_sync_rc=%u\n", cuCtxSynchronize());
    if (!primary) {
        launch_checked(get_function(mb, "bad_b"), sb);
        printf("fault_sync_rc=%u\n", cuCtxSynchronize());
        printf("end_b_rc=%u\n", cuCtxDestroy(b));
        /* After the report: a third context, again at the same handle. */
        CUmodule mc;
        CUstream sc;
        fresh(0, a, sa, "_again", &mc, &sc);
        CUfunction quick_c = get_function(mc, "quick");
        launch_checked(quick_c, sc);
        launch_checked(quick_c, NULL);
        printf("last_sync_rc=%u\n", cuCtxSynchronize());
    }
    return 0;
}
