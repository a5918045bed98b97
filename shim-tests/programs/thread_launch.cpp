// A kernel launched from a std::thread (a lambda ending in the launch), issue 15 item 5: built
// -O2 without -g, and stripped, by tests/threads.rs. With argument `fnptr` the thread runs a
// function pointer with an argument, `std::thread t(producer, p)` (issue 19 item 3).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
extern "C" {
#include "cuda_min.h"
}

static const char *MODULE = "// fake: quick\n// fake: bad fault=700 delay_us=1000\n";
static CUfunction quick, bad;

static void check(const char *what, CUresult rc) {
    if (rc) { printf("setup_failed=%s rc=%u\n", what, rc); exit(3); }
}

// Not static: its name stays in the dynamic symbol table of a stripped binary too (-rdynamic).
extern "C++" void producer(int *p);
void producer(int *p) {
    check("ctx", cuCtxSetCurrent(*(CUcontext *)p));
    check("launch", cuLaunchKernel(quick, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
    cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); // a tail call at -O2
}

int main(int argc, char **argv) {
    CUdevice dev; CUcontext ctx; CUmodule mod;
    check("init", cuInit(0));
    check("dev", cuDeviceGet(&dev, 0));
    check("retain", cuDevicePrimaryCtxRetain(&ctx, dev));
    check("set", cuCtxSetCurrent(ctx));
    check("load", cuModuleLoadData(&mod, MODULE));
    check("q", cuModuleGetFunction(&quick, mod, "quick"));
    check("b", cuModuleGetFunction(&bad, mod, "bad"));
    if (argc > 1 && std::string(argv[1]) == "fnptr") {
        std::thread t(producer, (int *)&ctx);
        t.join();
    } else {
        std::thread worker([ctx] {
            check("ctx", cuCtxSetCurrent(ctx));
            check("launch", cuLaunchKernel(quick, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
            check("launch", cuLaunchKernel(bad, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
        });
        worker.join();
    }
    CUresult rc = cuCtxSynchronize();
    printf("sync_rc=%u\n", rc);
    return rc == 0 ? 0 : 1;
}
