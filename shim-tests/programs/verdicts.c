/* Verdicts that must not be `exact` (issue 19, items 5 and 8), on the fake driver.
 *
 * Usage: verdicts SCENARIO [ARG] (linked with -lcuda, the fake).
 *   held_gap     one slow kernel (1 s), then 9,999 fill launches behind it on the legacy
 *                stream; the 6,000th fill (op #6,001) faults with 700. While the slow kernel runs
 *                the held list fills up with #1..#4,096 and drops the rest: ops #6,001..#9,744
 *                are no longer held when the error surfaces (ring 256: #9,745..#10,000).
 *   code CODE    fill, then bad (faults with CODE after 20 ms), then fill, on the legacy
 *                stream: 702 (launch timeout), 999 (unknown), 700 (with CUDA_MPS_PIPE_DIRECTORY
 *                pointing at a directory with a `control` file: an MPS client).
 * Prints sync_rc=N; exits 1 when the error came back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"

static void check(const char *what, CUresult rc) {
    if (rc != 0) {
        printf("setup_failed=%s rc=%u\n", what, rc);
        exit(3);
    }
}

static CUresult launch(CUfunction f) {
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
}

__attribute__((noinline)) void launch_bad_kernel(CUfunction f) {
    check("launch bad", launch(f));
}

int main(int argc, char **argv) {
    const char *scenario = argc > 1 ? argv[1] : "held_gap";
    const char *code = argc > 2 ? argv[2] : "700";
    char module[512];
    int gap = !strcmp(scenario, "held_gap");
    snprintf(module, sizeof module,
             "// fake: slow delay_us=1000000\n"
             "// fake: fill%s\n"
             "// fake: bad fault=%s delay_us=20000\n",
             gap ? " fault=700 fault_on=6000" : "", code);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction slow, fill, bad;
    check("cuInit", cuInit(0));
    check("cuDeviceGet", cuDeviceGet(&dev, 0));
    check("retain", cuDevicePrimaryCtxRetain(&ctx, dev));
    check("set", cuCtxSetCurrent(ctx));
    check("load", cuModuleLoadData(&mod, module));
    check("f1", cuModuleGetFunction(&slow, mod, "slow"));
    check("f2", cuModuleGetFunction(&fill, mod, "fill"));
    check("f4", cuModuleGetFunction(&bad, mod, "bad"));
    check("sync0", cuCtxSynchronize());
    if (gap) {
        check("slow", launch(slow));
        for (int i = 1; i <= 9999; i++) {
            CUresult rc = launch(fill);
            if (rc != 0) {
                printf("launch_rc=%u at=%d\n", rc, i);
                break;
            }
        }
    } else {
        check("fill", launch(fill));
        launch_bad_kernel(bad);
        check("fill", launch(fill));
    }
    CUresult rc = cuCtxSynchronize();
    printf("sync_rc=%u\n", rc);
    return rc == 0 ? 0 : 1;
}
