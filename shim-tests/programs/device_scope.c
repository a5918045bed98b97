/* The device scope of a verdict (blame::scope) against contexts cudablame no longer keeps or
 * never asked about, on the fake driver (linked with -lcuda). A fault stops the device: every
 * context of it reports the error; other devices' contexts never do.
 *
 * Usage: device_scope MODE
 *   destroyed      contexts A and B on device 0. B runs a healthy 300 ms kernel; A a kernel that
 *                  faults (700) after 30 ms; A is destroyed (cuCtxDestroy waits for its work, the
 *                  fault stops the device; it returns the 700, or 0 with the fake's
 *                  FAKE_CUDA_QUIET_DESTROY=1); then B's cuCtxSynchronize returns 700. When the
 *                  destroy returned 0, B's healthy kernel is the one op cudablame still holds:
 *                  never `exact` on it.
 *   proven         the same A destroyed with B current (no marker can be added to A's tail), its
 *                  work a quick healthy kernel; B's cuCtxSynchronize succeeds (the destroyed work
 *                  did not fault); then B's kernel that faults, and B's cuCtxSynchronize: `exact`.
 *   other_device   context A on device 0 runs the faulting kernel on stream sa; context D on
 *                  device 1 a healthy 400 ms kernel. With D current, after the fault, a call on
 *                  A's stream sa2 that cudablame never recorded (cuStreamSynchronize, or with
 *                  "query": cuStreamQuery, "launch": a launch onto it) returns A's 700:
 *                  never `exact` on D's healthy kernel (another device). So do calls naming
 *                  device 0 or a handle of A: "reset" (cuDevicePrimaryCtxReset_v2(0)),
 *                  "release" (cuDevicePrimaryCtxRelease_v2(0); A is then device 0's primary
 *                  context), "function" (cuModuleGetFunction of A's module).
 *   dropped        context A (device 0, never destroyed) runs a kernel that faults (700) after
 *                  1 s on stream sd, destroyed at once; then context B (device 0) creates,
 *                  uses and destroys 64 streams (their brief kernels, 20 ms each, unfinished when
 *                  destroyed even on a loaded machine: 1 ms was not, once, in CI),
 *                  which pushes sd off cudablame's retired list (its work still unproven), and
 *                  B's cuCtxSynchronize succeeds. B launches a 3 s kernel and synchronizes its
 *                  stream: 700, A's fault. B's kernel is the one op held: never `exact` on it.
 *   default_streams  context A (device 0) launches the faulting kernel on its legacy stream,
 *                  then context B (device 0) the healthy one on its own, and synchronizes it:
 *                  700. Both ops are #1 of a stream named "legacy".
 * Prints destroy_rc=, sync_rc= (the synchronization that returns the error) or rc=; exit 0. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"
#include "check.h"

static const char *MODULE =
    "// fake: bad fault=700 delay_us=30000\n"
    "// fake: healthy delay_us=300000\n"
    "// fake: quick\n"
    "// fake: late_bad fault=700 delay_us=1000000\n"
    "// fake: brief delay_us=20000\n"
    "// fake: long delay_us=3000000\n";

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "destroyed";
    CUdevice d0, d1;
    CUcontext a, b;
    CUmodule ma, mb;
    CUstream sa, sa2, sb;
    check("cuInit", cuInit(0));
    check("dev0", cuDeviceGet(&d0, 0));
    check("dev1", cuDeviceGet(&d1, 1));
    /* B: on device 0, or on device 1 for other_device (there called D). */
    check("ctx b", cuCtxCreate_v2(&b, 0, strncmp(mode, "other_device", 12) ? d0 : d1));
    check("load b", cuModuleLoadData(&mb, MODULE));
    check("stream b", cuStreamCreate(&sb, 1));
    if (strstr(mode, "reset") || strstr(mode, "release")) {
        /* A is device 0's primary context there. */
        check("ctx a", cuDevicePrimaryCtxRetain(&a, d0));
        check("set a", cuCtxSetCurrent(a));
    } else {
        check("ctx a", cuCtxCreate_v2(&a, 0, d0));
    }
    check("load a", cuModuleLoadData(&ma, MODULE));
    check("stream a", cuStreamCreate(&sa, 1));
    check("stream a2", cuStreamCreate(&sa2, 1));
    if (!strcmp(mode, "destroyed")) {
        check("set b", cuCtxSetCurrent(b));
        launch_checked(get_function(mb, "healthy"), sb);
        check("set a", cuCtxSetCurrent(a));
        launch_checked(get_function(ma, "bad"), sa);
        printf("destroy_rc=%d\n", cuCtxDestroy_v2(a));
        check("set b", cuCtxSetCurrent(b));
        printf("sync_rc=%d\n", cuCtxSynchronize());
    } else if (!strcmp(mode, "dropped")) {
        CUstream sd;
        check("stream d", cuStreamCreate(&sd, 1));
        launch_checked(get_function(ma, "late_bad"), sd);
        check("destroy d", cuStreamDestroy_v2(sd));
        check("set b", cuCtxSetCurrent(b));
        CUfunction brief = get_function(mb, "brief");
        for (int i = 0; i < 64; i++) {
            CUstream s;
            check("stream", cuStreamCreate(&s, 1));
            launch_checked(brief, s);
            check("destroy", cuStreamDestroy_v2(s));
        }
        check("healthy sync", cuCtxSynchronize());
        launch_checked(get_function(mb, "long"), sb);
        printf("sync_rc=%d\n", cuStreamSynchronize(sb));
    } else if (!strcmp(mode, "proven")) {
        CUfunction quick = get_function(ma, "quick");
        for (int i = 0; i < 5; i++) launch_checked(quick, sa);
        check("set b", cuCtxSetCurrent(b));
        printf("destroy_rc=%d\n", cuCtxDestroy_v2(a));
        check("healthy sync", cuCtxSynchronize());
        launch_checked(get_function(mb, "bad"), sb);
        printf("sync_rc=%d\n", cuCtxSynchronize());
    } else if (!strncmp(mode, "other_device", 12)) {
        const char *call = mode[12] == '_' ? mode + 13 : "sync";
        CUfunction healthy = get_function(mb, "healthy");
        launch_checked(get_function(ma, "bad"), sa);
        check("set d", cuCtxSetCurrent(b));
        launch_checked(healthy, sb);
        usleep(100000);
        CUresult rc;
        CUfunction f;
        if (!strcmp(call, "query"))
            rc = cuStreamQuery(sa2);
        else if (!strcmp(call, "reset"))
            rc = cuDevicePrimaryCtxReset_v2(d0);
        else if (!strcmp(call, "release"))
            rc = cuDevicePrimaryCtxRelease_v2(d0);
        else if (!strcmp(call, "function"))
            rc = cuModuleGetFunction(&f, ma, "quick");
        else if (!strcmp(call, "launch"))
            rc = cuLaunchKernel(healthy, 1, 1, 1, 32, 1, 1, 0, sa2, NULL, NULL);
        else
            rc = cuStreamSynchronize(sa2);
        printf("rc=%d\n", rc);
    } else if (!strcmp(mode, "default_streams")) {
        launch_checked(get_function(ma, "bad"), NULL);
        check("set b", cuCtxSetCurrent(b));
        launch_checked(get_function(mb, "healthy"), NULL);
        printf("sync_rc=%d\n", cuStreamSynchronize(NULL));
    } else {
        printf("unknown mode\n");
        return 2;
    }
    return 0;
}
