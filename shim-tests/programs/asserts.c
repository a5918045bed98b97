/* Device-side asserts on the fake driver: the driver prints the assert line on stdout itself
 * (vfprintf from inside libcuda.so.1, like the real one) before any call returns 710.
 *
 * Usage: asserts SCENARIO (linked with -lcuda, the fake). stdout is left fully buffered and holds
 * nothing that differs between runs, so the test can compare it byte for byte with and without
 * the shim.
 *   one       legacy stream: #2 fill, #3 check_kernel (asserts), #4 fill; the sync reports it.
 *   two_busy  stream B: quick, check_kernel (asserts after 20 ms); then stream A: three spin
 *             kernels (200 ms each) launched last. Both streams have unfinished work; the
 *             assert names check_kernel: exact.
 *   no_assert the same as two_busy with bad_kernel, which faults with 700 and prints nothing:
 *             likely.
 *   graph     stream G: a graph captured from fill, check_kernel, fill, launched; then stream A:
 *             three spins. The graph launch and A's spin are the candidates; the assert names a
 *             kernel of the graph: exact, the graph launch.
 *   nccl      like no_assert, but stream A runs a (fake) NCCL all-reduce kernel, launched last:
 *             likely, bad_kernel ranked first (communication kernels rank last). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"

static const char *MODULE =
    "// fake: fill\n"
    "// fake: quick\n"
    "// fake: spin delay_us=200000\n"
    "// fake: check_kernel fault=710 assert=i<n delay_us=20000\n"
    "// fake: bad_kernel fault=700 delay_us=20000\n"
    "// fake: ncclDevKernel_AllReduce_Sum_f32_RING_LL delay_us=200000\n";

static CUfunction fill, quick, spin, check_kernel, bad_kernel, nccl;

static void check(const char *what, CUresult rc) {
    if (rc != 0) {
        printf("setup_failed=%s rc=%u\n", what, rc);
        exit(3);
    }
}

static CUresult launch(CUfunction f, CUstream s) {
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
}

__attribute__((noinline)) void launch_asserting(CUfunction f, CUstream s) {
    check("launch", launch(f, s));
}

int main(int argc, char **argv) {
    const char *scenario = argc > 1 ? argv[1] : "one";
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    printf("scenario=%s\n", scenario);
    check("cuInit", cuInit(0));
    check("cuDeviceGet", cuDeviceGet(&dev, 0));
    check("retain", cuDevicePrimaryCtxRetain(&ctx, dev));
    check("set", cuCtxSetCurrent(ctx));
    check("load", cuModuleLoadData(&mod, MODULE));
    check("f1", cuModuleGetFunction(&fill, mod, "fill"));
    check("f2", cuModuleGetFunction(&quick, mod, "quick"));
    check("f3", cuModuleGetFunction(&spin, mod, "spin"));
    check("f4", cuModuleGetFunction(&check_kernel, mod, "check_kernel"));
    check("f5", cuModuleGetFunction(&bad_kernel, mod, "bad_kernel"));
    check("f6", cuModuleGetFunction(&nccl, mod, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
    check("sync0", cuCtxSynchronize());
    if (!strcmp(scenario, "one")) {
        check("fill", launch(fill, NULL));
        check("fill", launch(fill, NULL));
        launch_asserting(check_kernel, NULL);
        check("fill", launch(fill, NULL));
    } else if (!strcmp(scenario, "graph")) {
        CUstream a, g;
        CUgraph graph;
        CUgraphExec exec;
        check("stream a", cuStreamCreate(&a, 1));
        check("stream g", cuStreamCreate(&g, 1));
        check("begin", cuStreamBeginCapture_v2(g, CU_STREAM_CAPTURE_MODE_GLOBAL));
        check("fill", launch(fill, g));
        launch_asserting(check_kernel, g);
        check("fill", launch(fill, g));
        check("end", cuStreamEndCapture(g, &graph));
        check("instantiate", cuGraphInstantiateWithFlags(&exec, graph, 0));
        check("graph launch", cuGraphLaunch(exec, g));
        for (int i = 0; i < 3; i++) check("spin", launch(spin, a));
    } else {
        CUstream a, b;
        check("stream a", cuStreamCreate(&a, 1));
        check("stream b", cuStreamCreate(&b, 1));
        check("quick", launch(quick, b));
        int faults = !strcmp(scenario, "no_assert") || !strcmp(scenario, "nccl");
        launch_asserting(faults ? bad_kernel : check_kernel, b);
        for (int i = 0; i < 3; i++) check("spin", launch(!strcmp(scenario, "nccl") ? nccl : spin, a));
    }
    printf("after_launches\n");
    CUresult rc = cuCtxSynchronize();
    printf("sync_rc=%u\n", rc);
    return rc == 0 ? 0 : 1;
}
