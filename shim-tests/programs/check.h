/* check.h — the GPU-free test programs' setup check: a driver call that must succeed, else the
 * program prints `setup_failed=WHAT rc=RC` on stdout and exits with status 3 (the tests then fail
 * showing that line); and helpers built on it: `primary_context`, `get_function`, `ok_and_bad` and `launch_checked`. Include after cuda_min.h (scenarios.c and verdicts.c declare their own
 * driver types and keep their own copy). */
#ifndef CUDABLAME_TEST_CHECK_H
#define CUDABLAME_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static void check(const char *what, CUresult rc) {
    if (rc != 0) {
        printf("setup_failed=%s rc=%u\n", what, rc);
        exit(3);
    }
}

/* Initializes the driver and makes device 0's primary context current (checked); returns it. */
static inline CUcontext primary_context(void) {
    CUdevice dev;
    CUcontext ctx;
    check("cuInit", cuInit(0));
    check("cuDeviceGet", cuDeviceGet(&dev, 0));
    check("retain", cuDevicePrimaryCtxRetain(&ctx, dev));
    check("set", cuCtxSetCurrent(ctx));
    return ctx;
}

/* The function `name` of module `m` (checked). */
static inline CUfunction get_function(CUmodule m, const char *name) {
    CUfunction f;
    check(name, cuModuleGetFunction(&f, m, name));
    return f;
}

/* Device 0's primary context made current, `image` loaded, its kernels `ok` and `bad` found
 * into `*ok` and `*bad`, and a non-blocking stream created (all checked); returns the stream. */
static inline CUstream ok_and_bad(const char *image, CUfunction *ok, CUfunction *bad) {
    CUmodule m;
    CUstream s;
    primary_context();
    check("load", cuModuleLoadData(&m, image));
    *ok = get_function(m, "ok");
    *bad = get_function(m, "bad");
    check("stream", cuStreamCreate(&s, 1));
    return s;
}

/* One block of 32 threads of `f` on stream `s`, no arguments (checked). */
static inline void launch_checked(CUfunction f, CUstream s) {
    check("launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
}

#endif /* CUDABLAME_TEST_CHECK_H */
