/* A stream capture begun where cudablame's capture count may miss it: the graph must hold
 * exactly the program's kernels (no progress marker of cudablame's among its nodes).
 *
 * Usage: capture_abi v1       cuStreamBeginCapture (the CUDA 10.0 ABI, no mode argument)
 *        capture_abi v1_ptsz  cuStreamBeginCapture_ptsz on the per-thread stream
 *        capture_abi paused   cuStreamBeginCapture_v2 while cudablame_pause(1), resumed before
 *                             the launches (and the capture ended recording)
 * Then 3 launches of a quick kernel on the capturing stream, cuStreamEndCapture, and a fault
 * outside the capture. Prints launch_rc= (3 times), end_capture_rc=, graph_nodes=, sync_rc=. */
#define _GNU_SOURCE
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"
#include "check.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "v1") && strcmp(argv[1], "v1_ptsz") &&
                     strcmp(argv[1], "paused"))) {
        fprintf(stderr, "usage: capture_abi v1|v1_ptsz|paused\n");
        return 2;
    }
    const char *mode = argv[1];
    int (*pause_fn)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudablame_pause");
    CUmodule mod;
    CUfunction quick, bad;
    primary_context();
    check("module", cuModuleLoadData(&mod, "// fake: quick\n// fake: oob_write fault=700\n"));
    check("quick", cuModuleGetFunction(&quick, mod, "quick"));
    check("bad", cuModuleGetFunction(&bad, mod, "oob_write"));
    CUstream s = NULL;
    int ptsz = !strcmp(mode, "v1_ptsz");
    if (!ptsz) check("stream", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (!strcmp(mode, "v1")) {
        check("begin", cuStreamBeginCapture(s));
    } else if (ptsz) {
        check("begin", cuStreamBeginCapture_ptsz(NULL));
    } else {
        if (pause_fn) pause_fn(1);
        check("begin", cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        if (pause_fn) pause_fn(0);
    }
    for (int i = 0; i < 3; i++) {
        CUresult rc = ptsz ? cuLaunchKernel_ptsz(quick, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)
                           : cuLaunchKernel(quick, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
        printf("launch_rc=%u\n", rc);
    }
    CUgraph g = NULL;
    printf("end_capture_rc=%u\n", ptsz ? cuStreamEndCapture_ptsz(NULL, &g) : cuStreamEndCapture(s, &g));
    size_t nodes = 0;
    if (g) check("nodes", cuGraphGetNodes(g, NULL, &nodes));
    printf("graph_nodes=%zu\n", nodes);
    check("bad launch", cuLaunchKernel(bad, 8, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL));
    CUresult rc = cuCtxSynchronize();
    printf("sync_rc=%u\n", rc);
    return rc == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1;
}
