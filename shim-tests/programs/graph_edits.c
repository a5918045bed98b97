/* CUDA graphs whose kernels are not (or no longer) what was captured, on the fake driver: a
 * device-side assert (710) in check_kernel must never make a verdict exact by a stale kernel
 * list (cudablame's table of what each graph and executable graph runs).
 *
 * Usage: graph_edits SCENARIO (linked with -lcuda, the fake). In every scenario stream A runs
 * one kernel, launched first: a healthy check_kernel of another module (200 ms, never fails),
 * except where said; stream G runs one graph launch that really runs the asserting check_kernel
 * (710 after 20 ms, its assert line printed on stdout). With a marker after every op, each stream's
 * window is its one op; the assert names check_kernel, which the healthy kernel runs too by name.
 * A graph whose list cudablame takes to be [fill] leaves the healthy kernel the only op that runs
 * check_kernel: `exact` on it, which is wrong.
 *   reused_exec   run with FAKE_CUDA_REUSE_HANDLES=1. A graph captured from fill is instantiated,
 *                 launched, synchronized, and its executable graph destroyed; a graph built by hand
 *                 (cuGraphCreate + cuGraphAddKernelNode check_kernel) is instantiated at the
 *                 destroyed one's address (prints reused=1) and launched.
 *   exec_edit     a graph captured from fill; its node's kernel set to check_kernel in the
 *                 executable graph (cuGraphExecKernelNodeSetParams) after instantiation.
 *   graph_edit    the same edit in the graph (cuGraphKernelNodeSetParams), before instantiation.
 *   hand_built    run with FAKE_CUDA_REUSE_HANDLES=1. A graph captured from fill is destroyed; a
 *                 graph built by hand at its address (prints reused=1) with a check_kernel node.
 *   nested        a graph captured from fill and a launch of another executable graph, captured
 *                 from check_kernel: the outer graph runs both.
 *   update        an executable graph of [fill] updated (cuGraphExecUpdate_v2) from a graph
 *                 captured from check_kernel.
 *   update_spin   the same, stream A running spin (no check_kernel): the updated graph is the one
 *                 op that runs check_kernel.
 *   clone_spin    a clone (cuGraphClone) of a graph captured from check_kernel, instantiated;
 *                 stream A runs spin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_min.h"
#include "check.h"

static const char *MODULE =
    "// fake: fill\n"
    "// fake: spin delay_us=200000\n"
    "// fake: check_kernel fault=710 assert=i<n delay_us=20000\n";

/* Another module: a check_kernel of the same name that never fails. */
static const char *HEALTHY = "// fake: check_kernel delay_us=200000\n";

static CUfunction fill, spin, check_kernel, healthy_check;

static CUresult launch(CUfunction f, CUstream s) {
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
}

static CUDA_KERNEL_NODE_PARAMS params_of(CUfunction f) {
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 32;
    p.blockDimY = p.blockDimZ = 1;
    return p;
}

/* A graph captured on `s` from one launch of `f`, and its one node. */
static CUgraph capture_one(CUstream s, CUfunction f, CUgraphNode *node) {
    CUgraph g;
    size_t n = 1;
    check("begin", cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    check("captured launch", launch(f, s));
    check("end", cuStreamEndCapture(s, &g));
    if (node) check("nodes", cuGraphGetNodes(g, node, &n));
    return g;
}

static CUgraphExec instantiate(CUgraph g) {
    CUgraphExec e;
    check("instantiate", cuGraphInstantiateWithFlags(&e, g, 0));
    return e;
}

int main(int argc, char **argv) {
    const char *scenario = argc > 1 ? argv[1] : "exec_edit";
    CUmodule mod, healthy;
    CUstream a, g;
    CUgraphExec exec = NULL;
    CUfunction on_a;
    printf("scenario=%s\n", scenario);
    primary_context();
    check("load", cuModuleLoadData(&mod, MODULE));
    check("load healthy", cuModuleLoadData(&healthy, HEALTHY));
    check("fill", cuModuleGetFunction(&fill, mod, "fill"));
    check("spin", cuModuleGetFunction(&spin, mod, "spin"));
    check("check_kernel", cuModuleGetFunction(&check_kernel, mod, "check_kernel"));
    check("healthy", cuModuleGetFunction(&healthy_check, healthy, "check_kernel"));
    check("stream a", cuStreamCreate(&a, 1));
    check("stream g", cuStreamCreate(&g, 1));
    on_a = strstr(scenario, "spin") ? spin : healthy_check;
    CUDA_KERNEL_NODE_PARAMS asserting = params_of(check_kernel);

    if (!strcmp(scenario, "reused_exec")) {
        CUgraph old = capture_one(g, fill, NULL), built;
        CUgraphExec first = instantiate(old);
        CUgraphNode node;
        check("first launch", cuGraphLaunch(first, g));
        check("first sync", cuStreamSynchronize(g));
        check("exec destroy", cuGraphExecDestroy(first));
        check("create", cuGraphCreate(&built, 0));
        check("add node", cuGraphAddKernelNode(&node, built, NULL, 0, &asserting));
        exec = instantiate(built);
        printf("reused=%d\n", exec == first);
    } else if (!strcmp(scenario, "exec_edit")) {
        CUgraphNode node;
        CUgraph captured = capture_one(g, fill, &node);
        exec = instantiate(captured);
        check("exec set params", cuGraphExecKernelNodeSetParams(exec, node, &asserting));
    } else if (!strcmp(scenario, "graph_edit")) {
        CUgraphNode node;
        CUgraph captured = capture_one(g, fill, &node);
        check("set params", cuGraphKernelNodeSetParams(node, &asserting));
        exec = instantiate(captured);
    } else if (!strcmp(scenario, "hand_built")) {
        CUgraph old = capture_one(g, fill, NULL), built;
        CUgraphNode node;
        check("graph destroy", cuGraphDestroy(old));
        check("create", cuGraphCreate(&built, 0));
        printf("reused=%d\n", built == old);
        check("add node", cuGraphAddKernelNode(&node, built, NULL, 0, &asserting));
        exec = instantiate(built);
    } else if (!strcmp(scenario, "nested")) {
        CUgraphExec inner = instantiate(capture_one(g, check_kernel, NULL));
        CUgraph outer;
        check("begin outer", cuStreamBeginCapture_v2(g, CU_STREAM_CAPTURE_MODE_GLOBAL));
        check("outer fill", launch(fill, g));
        check("inner launch", cuGraphLaunch(inner, g));
        check("end outer", cuStreamEndCapture(g, &outer));
        exec = instantiate(outer);
    } else if (!strcmp(scenario, "update") || !strcmp(scenario, "update_spin")) {
        CUgraphExecUpdateResultInfo info;
        exec = instantiate(capture_one(g, fill, NULL));
        check("update", cuGraphExecUpdate(exec, capture_one(g, check_kernel, NULL), &info));
    } else if (!strcmp(scenario, "clone_spin")) {
        CUgraph clone;
        check("clone", cuGraphClone(&clone, capture_one(g, check_kernel, NULL)));
        exec = instantiate(clone);
    } else {
        printf("unknown scenario\n");
        return 2;
    }
    check("launch on a", launch(on_a, a));
    check("graph launch", cuGraphLaunch(exec, g));
    printf("after_launches\n");
    CUresult rc = cuCtxSynchronize();
    printf("sync_rc=%u\n", rc);
    return rc == 0 ? 0 : 1;
}
