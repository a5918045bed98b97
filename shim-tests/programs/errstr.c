/* The error strings a program sees before and after a sticky error (issue 23).
 *
 * Usage: errstr CODE HOW [late]   (linked with -lcuda, the fake, and libcudart.so.13 from
 * errstr_cudart.c). A kernel faulting with CODE (710 device-side assert, 702 launch timeout) is
 * launched at LAUNCH_LINE on the legacy stream, then the context is synchronized. Before and
 * after, cuGetErrorString is reached HOW: `direct` (the exported symbol), `proc`
 * (cuGetProcAddress_v2, as the static runtime does) or `dlsym` (dlsym on libcuda.so.1, as
 * Triton and ctypes do). With `late`, cudaGetErrorString is first called after the error.
 * Prints key=value lines for the test. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"
#include "check.h"

const char *cudaGetErrorString(int error);
const char *cudaGetErrorName(int error);

static const char *MODULE =
    "// fake: fill\n"
    "// fake: assert_kernel fault=710 assert=i<n delay_us=20000\n"
    "// fake: slow_kernel fault=702 delay_us=20000\n";

static PFN_cuGetErrorString get_error_string;

/* `KEY_rc=RC KEY=TEXT` for cuGetErrorString(code). */
static const char *show_cu(const char *key, CUresult code) {
    const char *s = "unset";
    CUresult rc = get_error_string(code, &s);
    printf("%s_rc=%u\n%s=%s\n", key, rc, key, s ? s : "(null)");
    return s;
}

__attribute__((noinline)) void launch_bad(CUfunction f) {
    printf("launch_line=%d\n", __LINE__ + 1);
    check("launch", cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
}

int main(int argc, char **argv) {
    CUresult code = argc > 1 ? (CUresult)atoi(argv[1]) : 710;
    const char *how = argc > 2 ? argv[2] : "direct";
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fill, bad;
    check("cuInit", cuInit(0));
    if (!strcmp(how, "direct")) {
        get_error_string = cuGetErrorString;
    } else if (!strcmp(how, "proc")) {
        CUdriverProcAddressQueryResult q;
        check("proc", cuGetProcAddress_v2("cuGetErrorString", (void **)&get_error_string, 12000,
                                          0, &q));
    } else {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        get_error_string = h ? (PFN_cuGetErrorString)dlsym(h, "cuGetErrorString") : NULL;
        if (!get_error_string) check("dlsym", 1);
    }
    show_cu("before_cu", code);
    /* `late`: the runtime's string is asked for only after the error (as PyTorch does). */
    int late = argc > 3 && !strcmp(argv[3], "late");
    printf("before_rt=%s\n", late ? "(not asked)" : cudaGetErrorString((int)code));
    check("cuDeviceGet", cuDeviceGet(&dev, 0));
    check("retain", cuDevicePrimaryCtxRetain(&ctx, dev));
    check("set", cuCtxSetCurrent(ctx));
    check("load", cuModuleLoadData(&mod, MODULE));
    check("f1", cuModuleGetFunction(&fill, mod, "fill"));
    check("f2", cuModuleGetFunction(&bad, mod, code == 702 ? "slow_kernel" : "assert_kernel"));
    check("fill", cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    launch_bad(bad);
    check("fill", cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    printf("sync_rc=%u\n", cuCtxSynchronize());
    const char *first = show_cu("after_cu", code);
    const char *again = show_cu("again_cu", code);
    printf("stable_cu=%d\n", first == again);
    const char *rt = cudaGetErrorString((int)code);
    printf("after_rt=%s\n", rt);
    printf("stable_rt=%d\n", rt == cudaGetErrorString((int)code));
    printf("name_rt=%s\n", cudaGetErrorName((int)code));
    show_cu("other_cu", 700);
    printf("other_rt=%s\n", cudaGetErrorString(700));
    show_cu("unknown_cu", 12345);
    printf("null_rc=%u\n", get_error_string(code, NULL));
    /* Still readable after more calls: the pointer lives as long as the process. */
    printf("first_again=%s\n", first);
    fflush(stdout);
    return 0;
}
