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
 *             likely, bad_kernel ranked first (communication kernels rank last).
 *   two_devices  device 1: check_kernel asserts (710, its line printed at once); device 0: a
 *             healthy check_kernel of another module (200 ms) on stream A beside bad_kernel
 *             (700 after 20 ms) on stream B; 100 ms later device 0's sync reports 700. Device
 *             1's assert line belongs to another error: likely, never check_kernel exact.
 *   graph_1030  stream G: a graph of 1,029 fill kernels and a last check_kernel (asserts),
 *             launched; stream A: a healthy check_kernel of another module (200 ms). The graph's
 *             kernel list is cut at 1,024 ops: it may run check_kernel too, so likely. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda_min.h"
#include "check.h"

static const char *MODULE =
    "// fake: fill\n"
    "// fake: quick\n"
    "// fake: spin delay_us=200000\n"
    "// fake: check_kernel fault=710 assert=i<n delay_us=20000\n"
    "// fake: bad_kernel fault=700 delay_us=20000\n"
    "// fake: ncclDevKernel_AllReduce_Sum_f32_RING_LL delay_us=200000\n";

/* Another module: a check_kernel of the same name that never fails. */
static const char *HEALTHY =
    "// fake: check_kernel delay_us=200000\n";

static CUfunction fill, quick, spin, check_kernel, bad_kernel, nccl;

static CUresult launch(CUfunction f, CUstream s) {
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
}

__attribute__((noinline)) void launch_asserting(CUfunction f, CUstream s) {
    check("launch", launch(f, s));
}

int main(int argc, char **argv) {
    const char *scenario = argc > 1 ? argv[1] : "one";
    CUcontext ctx;
    CUmodule mod;
    printf("scenario=%s\n", scenario);
    ctx = primary_context();
    check("load", cuModuleLoadData(&mod, MODULE));
    check("f1", cuModuleGetFunction(&fill, mod, "fill"));
    check("f2", cuModuleGetFunction(&quick, mod, "quick"));
    check("f3", cuModuleGetFunction(&spin, mod, "spin"));
    check("f4", cuModuleGetFunction(&check_kernel, mod, "check_kernel"));
    check("f5", cuModuleGetFunction(&bad_kernel, mod, "bad_kernel"));
    check("f6", cuModuleGetFunction(&nccl, mod, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
    check("sync0", cuCtxSynchronize());
    if (!strcmp(scenario, "two_devices")) {
        CUdevice dev1;
        CUcontext ctx1;
        CUmodule mod1, healthy;
        CUfunction check1, healthy_check;
        CUstream a, b;
        check("dev1", cuDeviceGet(&dev1, 1));
        check("retain1", cuDevicePrimaryCtxRetain(&ctx1, dev1));
        check("set1", cuCtxSetCurrent(ctx1));
        check("load1", cuModuleLoadData(&mod1, MODULE));
        check("f1 dev1", cuModuleGetFunction(&check1, mod1, "check_kernel"));
        launch_asserting(check1, NULL);
        usleep(50000); /* device 1's assert line is printed now */
        check("set0", cuCtxSetCurrent(ctx));
        check("load healthy", cuModuleLoadData(&healthy, HEALTHY));
        check("healthy", cuModuleGetFunction(&healthy_check, healthy, "check_kernel"));
        check("stream a", cuStreamCreate(&a, 1));
        check("stream b", cuStreamCreate(&b, 1));
        check("healthy check", launch(healthy_check, a));
        launch_asserting(bad_kernel, b);
        usleep(100000);
    } else if (!strcmp(scenario, "graph_1030")) {
        CUstream a, g;
        CUgraph graph;
        CUgraphExec exec;
        CUmodule healthy;
        CUfunction healthy_check;
        check("load healthy", cuModuleLoadData(&healthy, HEALTHY));
        check("healthy", cuModuleGetFunction(&healthy_check, healthy, "check_kernel"));
        check("stream a", cuStreamCreate(&a, 1));
        check("stream g", cuStreamCreate(&g, 1));
        check("begin", cuStreamBeginCapture_v2(g, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < 1029; i++) check("fill", launch(fill, g));
        launch_asserting(check_kernel, g);
        check("end", cuStreamEndCapture(g, &graph));
        check("instantiate", cuGraphInstantiateWithFlags(&exec, graph, 0));
        check("healthy check", launch(healthy_check, a));
        check("graph launch", cuGraphLaunch(exec, g));
    } else if (!strcmp(scenario, "one")) {
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
