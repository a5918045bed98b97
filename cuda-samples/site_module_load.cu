// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuModuleLoadData
// BUILD-FLAGS: -lcuda
//
// site_module_load.cu: the sticky error is reported by a driver-API module
// load (a plugin JIT-loading a small PTX kernel, as Triton, CuPy and friends
// do), in a program that otherwise uses the runtime API. See late_fault.cuh
// for the culprit and timing.
//
// Timeline (legacy default stream; cudart's primary context is current):
//   launch_warm_up()        warm_up     -> good; cudaDeviceSynchronize proves it done
//   launch_late_fault()     late_fault  -> CULPRIT, 700 after 10 ms
//   wait_for_fault()                    -> host sleeps 200 ms
//   cuModuleLoadData(kPluginPtx)        -> REPORTS: the context is dead
//
// Built with -lcuda (BUILD-FLAGS) for the direct driver call; the program
// calls cuModuleLoadData by symbol, which the shim exports.
//
// Expected: "sample-error: CUDA_ERROR_ILLEGAL_ADDRESS at
// cuModuleLoadData(&plugin, kPluginPtx) ...", exit 1.
#include <cuda.h>

#include "check.h"
#include "late_fault.cuh"

// A do-nothing plugin kernel (PTX ISA 8.0 = CUDA 12.0; JIT-compiled for the GPU).
static const char kPluginPtx[] =
    ".version 8.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry plugin_noop()\n"
    "{\n"
    "    ret;\n"
    "}\n";

int main() {
    const int n = 1024;
    int* buf = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(launch_warm_up(buf, n, 0));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_late_fault(0));
    wait_for_fault();
    CUmodule plugin = nullptr;
    CU_CHECK(cuModuleLoadData(&plugin, kPluginPtx));
    CHECK(cudaDeviceSynchronize());  // backstop
    printf("unexpected: no error\n");
    return 0;
}
