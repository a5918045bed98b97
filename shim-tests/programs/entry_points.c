/* Calls every hooked driver entry point (the list of src/cuda/entry_points.rs) with fixed
 * arguments, successful and failing ones, and prints each return code and the out-values it
 * produced, normalized so that two runs can be compared line by line: handles become H1, H2, ...
 * in order of first appearance, device/pinned pointers A<n>+offset (n counts allocations in call
 * order), copied data a checksum.
 *
 * Usage: entry_points WAY [MODULE_FILE]   WAY: how each function is reached
 *          dlsym    dlsym(dlopen("libcuda.so.1"), name)            (Triton, static runtime's dlsym)
 *          default  dlsym(RTLD_DEFAULT, name), the driver global   (what -lcuda binds to)
 *          gpa      cuGetProcAddress_v2(name, 12080, 0)            (the CUDA runtime)
 *        entry_points --list   prints the names this program knows, one a line
 * Output: "resolved NAME MODULE" for every name (MODULE: basename of the object that holds the
 * address, "-" when not found), then "call NAME rc=N" / "out KEY=VALUE" / "absent NAME" lines,
 * and "calls=N" at the end. Exit status 0. */
#define _GNU_SOURCE
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void *CUmemoryPool_;

/* Every hooked entry point, with its exact C parameters (cuda.h, CUDA 13). */
#define HOOKED(X)                                                                                 \
    X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,     \
                       unsigned, CUstream, void **, void **))                                    \
    X(cuLaunchKernel_ptsz, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,          \
                            unsigned, unsigned, CUstream, void **, void **))                     \
    X(cuLaunchKernelEx, (const CUlaunchConfig *, CUfunction, void **, void **))                   \
    X(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *, CUfunction, void **, void **))              \
    X(cuLaunchCooperativeKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,   \
                                  unsigned, unsigned, CUstream, void **))                        \
    X(cuLaunchCooperativeKernel_ptsz, (CUfunction, unsigned, unsigned, unsigned, unsigned,        \
                                       unsigned, unsigned, unsigned, CUstream, void **))         \
    X(cuGraphLaunch, (CUgraphExec, CUstream))                                                     \
    X(cuGraphLaunch_ptsz, (CUgraphExec, CUstream))                                                \
    X(cuMemcpyAsync, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                                \
    X(cuMemcpyAsync_ptsz, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                           \
    X(cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, CUstream))                        \
    X(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr, const void *, size_t, CUstream))                   \
    X(cuMemcpyDtoHAsync_v2, (void *, CUdeviceptr, size_t, CUstream))                              \
    X(cuMemcpyDtoHAsync_v2_ptsz, (void *, CUdeviceptr, size_t, CUstream))                         \
    X(cuMemcpyDtoDAsync_v2, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                         \
    X(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                    \
    X(cuMemcpy2DAsync_v2, (const void *, CUstream))                                               \
    X(cuMemcpy2DAsync_v2_ptsz, (const void *, CUstream))                                          \
    X(cuMemcpy3DAsync_v2, (const void *, CUstream))                                               \
    X(cuMemcpy3DAsync_v2_ptsz, (const void *, CUstream))                                          \
    X(cuMemcpyPeerAsync, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream))      \
    X(cuMemcpyPeerAsync_ptsz, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream)) \
    X(cuMemsetD8Async, (CUdeviceptr, unsigned char, size_t, CUstream))                            \
    X(cuMemsetD8Async_ptsz, (CUdeviceptr, unsigned char, size_t, CUstream))                       \
    X(cuMemsetD16Async, (CUdeviceptr, unsigned short, size_t, CUstream))                          \
    X(cuMemsetD16Async_ptsz, (CUdeviceptr, unsigned short, size_t, CUstream))                     \
    X(cuMemsetD32Async, (CUdeviceptr, unsigned, size_t, CUstream))                                \
    X(cuMemsetD32Async_ptsz, (CUdeviceptr, unsigned, size_t, CUstream))                           \
    X(cuMemcpy, (CUdeviceptr, CUdeviceptr, size_t))                                               \
    X(cuMemcpy_ptds, (CUdeviceptr, CUdeviceptr, size_t))                                          \
    X(cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                                       \
    X(cuMemcpyHtoD_v2_ptds, (CUdeviceptr, const void *, size_t))                                  \
    X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                             \
    X(cuMemcpyDtoH_v2_ptds, (void *, CUdeviceptr, size_t))                                        \
    X(cuMemcpyDtoD_v2, (CUdeviceptr, CUdeviceptr, size_t))                                        \
    X(cuMemcpyDtoD_v2_ptds, (CUdeviceptr, CUdeviceptr, size_t))                                   \
    X(cuMemcpyPeer, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t))                     \
    X(cuMemcpyPeer_ptds, (CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t))                \
    X(cuMemcpy2D_v2, (const void *))                                                              \
    X(cuMemcpy2D_v2_ptds, (const void *))                                                         \
    X(cuMemcpy2DUnaligned_v2, (const void *))                                                     \
    X(cuMemcpy2DUnaligned_v2_ptds, (const void *))                                                \
    X(cuMemcpy3D_v2, (const void *))                                                              \
    X(cuMemcpy3D_v2_ptds, (const void *))                                                         \
    X(cuMemsetD8_v2, (CUdeviceptr, unsigned char, size_t))                                        \
    X(cuMemsetD8_v2_ptds, (CUdeviceptr, unsigned char, size_t))                                   \
    X(cuMemsetD16_v2, (CUdeviceptr, unsigned short, size_t))                                      \
    X(cuMemsetD16_v2_ptds, (CUdeviceptr, unsigned short, size_t))                                 \
    X(cuMemsetD32_v2, (CUdeviceptr, unsigned, size_t))                                            \
    X(cuMemsetD32_v2_ptds, (CUdeviceptr, unsigned, size_t))                                       \
    X(cuCtxSynchronize, (void))                                                                   \
    X(cuCtxSynchronize_v2, (CUcontext))                                                           \
    X(cuStreamSynchronize, (CUstream))                                                            \
    X(cuStreamSynchronize_ptsz, (CUstream))                                                       \
    X(cuStreamQuery, (CUstream))                                                                  \
    X(cuStreamQuery_ptsz, (CUstream))                                                             \
    X(cuEventSynchronize, (CUevent))                                                              \
    X(cuEventQuery, (CUevent))                                                                    \
    X(cuEventRecord, (CUevent, CUstream))                                                         \
    X(cuEventRecord_ptsz, (CUevent, CUstream))                                                    \
    X(cuEventRecordWithFlags, (CUevent, CUstream, unsigned))                                      \
    X(cuEventRecordWithFlags_ptsz, (CUevent, CUstream, unsigned))                                 \
    X(cuLaunchHostFunc, (CUstream, void (*)(void *), void *))                                     \
    X(cuLaunchHostFunc_ptsz, (CUstream, void (*)(void *), void *))                                \
    X(cuStreamWaitEvent, (CUstream, CUevent, unsigned))                                           \
    X(cuStreamWaitEvent_ptsz, (CUstream, CUevent, unsigned))                                      \
    X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                                     \
    X(cuMemAllocManaged, (CUdeviceptr *, size_t, unsigned))                                       \
    X(cuMemAllocPitch_v2, (CUdeviceptr *, size_t *, size_t, size_t, unsigned))                    \
    X(cuMemFree_v2, (CUdeviceptr))                                                                \
    X(cuMemAllocAsync, (CUdeviceptr *, size_t, CUstream))                                         \
    X(cuMemAllocAsync_ptsz, (CUdeviceptr *, size_t, CUstream))                                    \
    X(cuMemAllocFromPoolAsync, (CUdeviceptr *, size_t, CUmemoryPool_, CUstream))                  \
    X(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *, size_t, CUmemoryPool_, CUstream))             \
    X(cuMemFreeAsync, (CUdeviceptr, CUstream))                                                    \
    X(cuMemFreeAsync_ptsz, (CUdeviceptr, CUstream))                                               \
    X(cuMemHostAlloc, (void **, size_t, unsigned))                                                \
    X(cuMemFreeHost, (void *))                                                                    \
    X(cuModuleLoad, (CUmodule *, const char *))                                                   \
    X(cuModuleLoadData, (CUmodule *, const void *))                                               \
    X(cuModuleLoadDataEx, (CUmodule *, const void *, unsigned, CUjit_option *, void **))          \
    X(cuModuleLoadFatBinary, (CUmodule *, const void *))                                          \
    X(cuLibraryLoadData, (CUlibrary *, const void *, CUjit_option *, void **, unsigned,           \
                          CUlibraryOption *, void **, unsigned))                                 \
    X(cuLibraryLoadFromFile, (CUlibrary *, const char *, CUjit_option *, void **, unsigned,       \
                              CUlibraryOption *, void **, unsigned))                             \
    X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                                \
    X(cuLibraryGetKernel, (CUkernel *, CUlibrary, const char *))                                  \
    X(cuKernelGetFunction, (CUfunction *, CUkernel))                                              \
    X(cuStreamBeginCapture, (CUstream))                                                           \
    X(cuStreamBeginCapture_ptsz, (CUstream))                                                      \
    X(cuStreamBeginCapture_v2, (CUstream, CUstreamCaptureMode))                                   \
    X(cuStreamBeginCapture_v2_ptsz, (CUstream, CUstreamCaptureMode))                              \
    X(cuStreamBeginCaptureToGraph, (CUstream, CUgraph, const CUgraphNode *, const void *, size_t, \
                                    CUstreamCaptureMode))                                        \
    X(cuStreamBeginCaptureToGraph_ptsz, (CUstream, CUgraph, const CUgraphNode *, const void *,    \
                                         size_t, CUstreamCaptureMode))                           \
    X(cuStreamEndCapture, (CUstream, CUgraph *))                                                  \
    X(cuStreamEndCapture_ptsz, (CUstream, CUgraph *))                                             \
    X(cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long))                  \
    X(cuGraphInstantiateWithParams, (CUgraphExec *, CUgraph, void *))                             \
    X(cuGraphInstantiateWithParams_ptsz, (CUgraphExec *, CUgraph, void *))                        \
    X(cuGraphInstantiate, (CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t))                \
    X(cuGraphInstantiate_v2, (CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t))             \
    X(cuGraphCreate, (CUgraph *, unsigned))                                                       \
    X(cuGraphClone, (CUgraph *, CUgraph))                                                         \
    X(cuGraphDestroy, (CUgraph))                                                                  \
    X(cuGraphExecDestroy, (CUgraphExec))                                                          \
    X(cuGraphAddKernelNode, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const void *))  \
    X(cuGraphAddKernelNode_v2, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t,              \
                                const void *))                                                   \
    X(cuGraphAddChildGraphNode, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUgraph))   \
    X(cuGraphAddNode, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t, void *))              \
    X(cuGraphAddNode_v2, (CUgraphNode *, CUgraph, const CUgraphNode *, const void *, size_t,      \
                          void *))                                                               \
    X(cuGraphKernelNodeSetParams, (CUgraphNode, const void *))                                    \
    X(cuGraphKernelNodeSetParams_v2, (CUgraphNode, const void *))                                 \
    X(cuGraphNodeSetParams, (CUgraphNode, void *))                                                \
    X(cuGraphDestroyNode, (CUgraphNode))                                                          \
    X(cuGraphExecKernelNodeSetParams, (CUgraphExec, CUgraphNode, const void *))                   \
    X(cuGraphExecKernelNodeSetParams_v2, (CUgraphExec, CUgraphNode, const void *))                \
    X(cuGraphExecNodeSetParams, (CUgraphExec, CUgraphNode, void *))                               \
    X(cuGraphExecChildGraphNodeSetParams, (CUgraphExec, CUgraphNode, CUgraph))                    \
    X(cuGraphNodeSetEnabled, (CUgraphExec, CUgraphNode, unsigned))                                \
    X(cuGraphExecUpdate, (CUgraphExec, CUgraph, CUgraphNode *, void *))                           \
    X(cuGraphExecUpdate_v2, (CUgraphExec, CUgraph, void *))                                       \
    X(cuStreamDestroy_v2, (CUstream))                                                             \
    X(cuMemsetD2D8_v2, (CUdeviceptr, size_t, unsigned char, size_t, size_t))                      \
    X(cuMemsetD2D8_v2_ptds, (CUdeviceptr, size_t, unsigned char, size_t, size_t))                 \
    X(cuMemsetD2D16_v2, (CUdeviceptr, size_t, unsigned short, size_t, size_t))                    \
    X(cuMemsetD2D16_v2_ptds, (CUdeviceptr, size_t, unsigned short, size_t, size_t))               \
    X(cuMemsetD2D32_v2, (CUdeviceptr, size_t, unsigned, size_t, size_t))                          \
    X(cuMemsetD2D32_v2_ptds, (CUdeviceptr, size_t, unsigned, size_t, size_t))                     \
    X(cuMemsetD2D8Async, (CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream))          \
    X(cuMemsetD2D8Async_ptsz, (CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream))     \
    X(cuMemsetD2D16Async, (CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream))        \
    X(cuMemsetD2D16Async_ptsz, (CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream))   \
    X(cuMemsetD2D32Async, (CUdeviceptr, size_t, unsigned, size_t, size_t, CUstream))              \
    X(cuMemsetD2D32Async_ptsz, (CUdeviceptr, size_t, unsigned, size_t, size_t, CUstream))         \
    X(cuMemcpy3DPeer, (const void *))                                                             \
    X(cuMemcpy3DPeer_ptds, (const void *))                                                        \
    X(cuMemcpy3DPeerAsync, (const void *, CUstream))                                              \
    X(cuMemcpy3DPeerAsync_ptsz, (const void *, CUstream))                                         \
    X(cuStreamWriteValue32, (CUstream, CUdeviceptr, cuuint32_t, unsigned))                       \
    X(cuStreamWriteValue32_ptsz, (CUstream, CUdeviceptr, cuuint32_t, unsigned))                  \
    X(cuStreamWriteValue32_v2, (CUstream, CUdeviceptr, cuuint32_t, unsigned))                    \
    X(cuStreamWriteValue32_v2_ptsz, (CUstream, CUdeviceptr, cuuint32_t, unsigned))               \
    X(cuStreamWriteValue64, (CUstream, CUdeviceptr, cuuint64_t, unsigned))                       \
    X(cuStreamWriteValue64_ptsz, (CUstream, CUdeviceptr, cuuint64_t, unsigned))                  \
    X(cuStreamWriteValue64_v2, (CUstream, CUdeviceptr, cuuint64_t, unsigned))                    \
    X(cuStreamWriteValue64_v2_ptsz, (CUstream, CUdeviceptr, cuuint64_t, unsigned))               \
    X(cuCtxDestroy_v2, (CUcontext))                                                               \
    X(cuDevicePrimaryCtxReset_v2, (CUdevice))                                                     \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice))                                                   \
    X(cuGetErrorString, (CUresult, const char **))

/* Functions the script needs that cudablame does not hook (resolved the same way). */
#define HELPERS(X)                                                                                \
    X(cuInit, (unsigned))                                                                         \
    X(cuDeviceGet, (CUdevice *, int))                                                             \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                          \
    X(cuCtxSetCurrent, (CUcontext))                                                               \
    X(cuCtxCreate_v2, (CUcontext *, unsigned, CUdevice))                                          \
    X(cuStreamCreate, (CUstream *, unsigned))                                                     \
    X(cuEventCreate, (CUevent *, unsigned))                                                       \
    X(cuStreamIsCapturing, (CUstream, CUstreamCaptureStatus *))                                   \
    X(cuGraphGetNodes, (CUgraph, CUgraphNode *, size_t *))

#define DECLARE(name, params) static CUresult(*p_##name) params;
HOOKED(DECLARE)
HELPERS(DECLARE)

static const char *way;
static void *lib;
static int calls;
static CUresult rc;

/* ---- normalization ---------------------------------------------------------------------- */

static uintptr_t handles[512];
static int nhandles;
static struct { uintptr_t base; size_t size; int label; } allocs[256];
static int nallocs, alloc_labels;

static void allocated(uintptr_t base, size_t size) {
    if (nallocs < 256) {
        allocs[nallocs].base = base;
        allocs[nallocs].size = size ? size : 1;
        allocs[nallocs].label = ++alloc_labels;
        nallocs++;
    }
}

/* "0", "A<n>+off" (the latest allocation holding v), or "H<n>" (n: first appearance). */
static const char *norm(uintptr_t v) {
    static char buf[8][48];
    static int next;
    char *b = buf[next++ % 8];
    if (v == 0) return "0";
    for (int i = nallocs - 1; i >= 0; i--) {
        if (v >= allocs[i].base && v < allocs[i].base + allocs[i].size) {
            snprintf(b, 48, "A%d+%zu", allocs[i].label, (size_t)(v - allocs[i].base));
            return b;
        }
    }
    int i = 0;
    while (i < nhandles && handles[i] != v) i++;
    if (i == nhandles && nhandles < 512) handles[nhandles++] = v;
    snprintf(b, 48, "H%d", i + 1);
    return b;
}

static unsigned long checksum(const void *p, size_t n) {
    const unsigned char *c = p;
    unsigned long h = 5381;
    for (size_t i = 0; i < n; i++) h = h * 33 + c[i];
    return h;
}

#define OUT(key, fmt, ...) printf("out %s=" fmt "\n", key, __VA_ARGS__)

/* Calls p_NAME(args) if the function was found, printing its return code. */
#define CALL(name, ...)                                                                           \
    do {                                                                                          \
        if (!p_##name) {                                                                          \
            printf("absent %s\n", #name);                                                         \
            rc = 999999;                                                                          \
        } else {                                                                                  \
            rc = p_##name(__VA_ARGS__);                                                           \
            calls++;                                                                              \
            printf("call %s rc=%u\n", #name, (unsigned)rc);                                       \
        }                                                                                         \
    } while (0)

/* ---- resolution ----------------------------------------------------------------------------- */

static CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *resolve(const char *name) {
    void *p = NULL;
    if (!strcmp(way, "dlsym")) {
        p = dlsym(lib, name);
    } else if (!strcmp(way, "default")) {
        p = dlsym(RTLD_DEFAULT, name);
    } else {
        CUdriverProcAddressQueryResult status = 0;
        /* 12080: every exported name resolves to itself, but cuStreamBeginCapture, whose CUDA
         * 10.0 ABI only a version below 10010 gets, and the graph calls whose CUDA 10 ABI only a
         * version below 12000 gets. */
        static const char *before_12[] = {"cuGraphAddKernelNode", "cuGraphKernelNodeSetParams",
                                          "cuGraphExecKernelNodeSetParams", "cuGraphExecUpdate",
                                          "cuGraphAddNode"};
        int v1 = !strcmp(name, "cuStreamBeginCapture") || !strcmp(name, "cuStreamBeginCapture_ptsz");
        int version = v1 ? 10000 : 12080;
        for (size_t i = 0; i < sizeof before_12 / sizeof *before_12; i++)
            if (!strcmp(name, before_12[i])) version = 11000;
        if (gpa(name, &p, version, 0, &status) != CUDA_SUCCESS) p = NULL;
    }
    const char *module = "-";
    Dl_info info;
    if (p && dladdr(p, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        module = slash ? slash + 1 : info.dli_fname;
    }
    printf("resolved %s %s\n", name, module);
    return p;
}

/* ---- the script ----------------------------------------------------------------------------- */

static const char *IMAGE =
    "// fake: quick\n"
    "// fake: slow delay_us=300000\n"
    "// fake: oob fault=700\n"
    "// fake: refused launch_error=701\n";

static void host_fn(void *arg) { (void)arg; }

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--list")) {
#define LIST(name, params) puts(#name);
        HOOKED(LIST)
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: entry_points dlsym|default|gpa [MODULE_FILE] | --list\n");
        return 2;
    }
    way = argv[1];
    const char *module_file = argc > 2 ? argv[2] : "/nonexistent/module.ptx";
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        printf("setup_failed=dlopen %s\n", dlerror());
        return 3;
    }
    *(void **)&gpa = dlsym(lib, "cuGetProcAddress_v2");
#define RESOLVE(name, params) *(void **)&p_##name = resolve(#name);
    HELPERS(RESOLVE)
    HOOKED(RESOLVE)

    CUdevice dev;
    CUcontext ctx;
    CALL(cuInit, 0);
    CALL(cuDeviceGet, &dev, 0);
    CALL(cuDevicePrimaryCtxRetain, &ctx, dev);
    CALL(cuCtxSetCurrent, ctx);
    OUT("ctx", "%s", norm((uintptr_t)ctx));

    /* ---- modules, libraries, kernel handles ---- */
    CUmodule mod = NULL, mod_ex = NULL, mod_file = NULL, m = NULL;
    CUlibrary library = NULL, library2 = NULL;
    CALL(cuModuleLoadData, &mod, IMAGE);
    OUT("mod", "%s", norm((uintptr_t)mod));
    CALL(cuModuleLoadData, &m, "// fake: x bogus=1\n");
    CALL(cuModuleLoadData, &m, "// fake: module_error=209\n");
    CALL(cuModuleLoadData, NULL, IMAGE);
    CALL(cuModuleLoadDataEx, &mod_ex, IMAGE, 0, NULL, NULL);
    OUT("mod_ex", "%s", norm((uintptr_t)mod_ex));
    CALL(cuModuleLoad, &mod_file, module_file);
    OUT("mod_file", "%s", norm((uintptr_t)mod_file));
    CALL(cuModuleLoad, &m, "/nonexistent/module.ptx");
    CALL(cuModuleLoadFatBinary, &m, IMAGE);
    CALL(cuLibraryLoadData, &library, IMAGE, NULL, NULL, 0, NULL, NULL, 0);
    OUT("library", "%s", norm((uintptr_t)library));
    CALL(cuLibraryLoadFromFile, &library2, module_file, NULL, NULL, 0, NULL, NULL, 0);

    CUfunction quick = NULL, slow = NULL, oob = NULL, refused = NULL, f = NULL, kf = NULL;
    CUkernel kquick = NULL, k = NULL;
    CALL(cuModuleGetFunction, &quick, mod, "quick");
    OUT("quick", "%s", norm((uintptr_t)quick));
    CALL(cuModuleGetFunction, &slow, mod, "slow");
    CALL(cuModuleGetFunction, &oob, mod, "oob");
    CALL(cuModuleGetFunction, &refused, mod, "refused");
    CALL(cuModuleGetFunction, &f, mod, "missing");
    CALL(cuModuleGetFunction, NULL, mod, "quick");
    CALL(cuModuleGetFunction, &f, NULL, "quick");
    CALL(cuModuleGetFunction, &f, mod_ex, "quick");
    OUT("quick_ex", "%s", norm((uintptr_t)f));
    CALL(cuLibraryGetKernel, &kquick, library, "quick");
    OUT("kquick", "%s", norm((uintptr_t)kquick));
    CALL(cuLibraryGetKernel, &k, library, "missing");
    CALL(cuKernelGetFunction, &kf, kquick);
    OUT("kf", "%s", norm((uintptr_t)kf));
    CALL(cuKernelGetFunction, &kf, NULL);

    /* ---- memory ---- */
    CUdeviceptr d1 = 0, d2 = 0, d3 = 0, da = 0, db = 0, dx = 0;
    void *h1 = NULL;
    size_t pitch = 0;
    CALL(cuMemAlloc_v2, &d1, 4096);
    if (!rc) allocated(d1, 4096);
    OUT("d1", "%s", norm(d1));
    CALL(cuMemAlloc_v2, &d2, 4096);
    if (!rc) allocated(d2, 4096);
    OUT("d2", "%s", norm(d2));
    CALL(cuMemAlloc_v2, &d3, 64);
    if (!rc) allocated(d3, 64);
    CALL(cuMemAlloc_v2, NULL, 64);
    CALL(cuMemAllocManaged, &dx, 64, 1);
    CALL(cuMemAllocPitch_v2, &dx, &pitch, 64, 4, 4);
    CALL(cuMemHostAlloc, &h1, 4096, CU_MEMHOSTALLOC_DEVICEMAP);
    if (!rc) allocated((uintptr_t)h1, 4096);
    OUT("h1", "%s", norm((uintptr_t)h1));
    CALL(cuMemHostAlloc, NULL, 64, 0);

    CUstream s = NULL, sn = NULL;
    CALL(cuStreamCreate, &s, CU_STREAM_DEFAULT);
    CALL(cuStreamCreate, &sn, CU_STREAM_NON_BLOCKING);
    OUT("streams", "%s %s", norm((uintptr_t)s), norm((uintptr_t)sn));
    CALL(cuMemAllocAsync, &da, 256, s);
    if (!rc) allocated(da, 256);
    CALL(cuMemAllocAsync_ptsz, &db, 256, NULL);
    if (!rc) allocated(db, 256);
    OUT("async_allocs", "%s %s", norm(da), norm(db));
    CALL(cuMemAllocAsync, &dx, 256, (CUstream)0x1234);
    CALL(cuMemAllocFromPoolAsync, &dx, 256, NULL, s);
    CALL(cuMemAllocFromPoolAsync_ptsz, &dx, 256, NULL, NULL);

    /* ---- synchronous copies and memsets ---- */
    static unsigned char hb[4096], back[4096];
    for (int i = 0; i < 4096; i++) hb[i] = (unsigned char)(i * 7 + 3);
    CALL(cuMemcpyHtoD_v2, d1, hb, 4096);
    CALL(cuMemcpyHtoD_v2_ptds, d2, hb + 1, 4095);
    CALL(cuMemcpyHtoD_v2, 0x10, hb, 16);
    CALL(cuMemcpyDtoD_v2, d2, d1, 1024);
    CALL(cuMemcpyDtoD_v2_ptds, d2 + 1024, d1 + 7, 1024);
    CALL(cuMemcpy, d3, d1 + 100, 64);
    CALL(cuMemcpy_ptds, d3 + 8, d2, 8);
    CALL(cuMemcpyDtoH_v2, back, d2, 4096);
    OUT("sum_d2", "%lu", checksum(back, 4096));
    CALL(cuMemcpyDtoH_v2_ptds, back, d3, 64);
    OUT("sum_d3", "%lu", checksum(back, 64));
    CALL(cuMemcpyDtoH_v2, back, d1, 8192);
    CALL(cuMemcpyPeer, d2, ctx, d1, ctx, 16);
    CALL(cuMemcpyPeer_ptds, d2, ctx, d1, ctx, 16);
    CALL(cuMemcpy2D_v2, NULL);
    CALL(cuMemcpy2D_v2_ptds, NULL);
    CALL(cuMemcpy2DUnaligned_v2, NULL);
    CALL(cuMemcpy2DUnaligned_v2_ptds, NULL);
    CALL(cuMemcpy3D_v2, NULL);
    CALL(cuMemcpy3D_v2_ptds, NULL);
    CALL(cuMemsetD8_v2, d1, 0xab, 100);
    CALL(cuMemsetD8_v2_ptds, d1 + 200, 0xcd, 100);
    CALL(cuMemsetD16_v2, d1, 0xabcd, 10);
    CALL(cuMemsetD16_v2_ptds, d1, 0xabcd, 10);
    CALL(cuMemsetD32_v2, d1 + 400, 0x01020304u, 10);
    CALL(cuMemsetD32_v2_ptds, d1 + 800, 0x05060708u, 10);
    CALL(cuMemsetD32_v2, d1 + 4090, 1, 10);
    CALL(cuMemcpyDtoH_v2, back, d1, 4096);
    OUT("sum_d1", "%lu", checksum(back, 4096));

    /* ---- asynchronous copies and memsets (stream s, then the per-thread stream: the two do
     * not order each other's work) ---- */
    CALL(cuMemcpyHtoDAsync_v2, d1, hb + 5, 2048, s);
    CALL(cuMemcpyDtoDAsync_v2, d2, d1, 4096, s);
    CALL(cuMemcpyAsync, da, d1 + 300, 256, s);
    CALL(cuMemsetD8Async, d2 + 10, 0x11, 30, s);
    CALL(cuMemsetD16Async, d2, 1, 1, s);
    CALL(cuMemsetD32Async, d2 + 100, 0xdeadbeefu, 4, s);
    CALL(cuStreamSynchronize, s);
    CALL(cuMemcpyHtoDAsync_v2_ptsz, d1 + 2048, hb + 9, 2048, NULL);
    CALL(cuMemcpyDtoDAsync_v2_ptsz, d3, d1 + 64, 64, NULL);
    CALL(cuMemcpyAsync_ptsz, db, d1 + 600, 256, NULL);
    CALL(cuMemsetD8Async_ptsz, d2 + 50, 0x22, 30, NULL);
    CALL(cuMemsetD16Async_ptsz, d2, 1, 1, NULL);
    CALL(cuMemsetD32Async_ptsz, d2 + 200, 0xfeedfaceu, 4, NULL);
    CALL(cuStreamSynchronize_ptsz, NULL);
    CALL(cuMemcpy2DAsync_v2, NULL, s);
    CALL(cuMemcpy2DAsync_v2_ptsz, NULL, NULL);
    CALL(cuMemcpy3DAsync_v2, NULL, s);
    CALL(cuMemcpy3DAsync_v2_ptsz, NULL, NULL);
    CALL(cuMemcpyPeerAsync, d2, ctx, d1, ctx, 16, s);
    CALL(cuMemcpyPeerAsync_ptsz, d2, ctx, d1, ctx, 16, NULL);
    CALL(cuMemcpyAsync, d1, d2, 64, (CUstream)0x1234);
    CALL(cuMemsetD8Async, 0x10, 1, 1, s);
    CALL(cuMemcpyDtoHAsync_v2, back, d2, 4096, s);
    CALL(cuStreamSynchronize, s);
    OUT("sum_async_d2", "%lu", checksum(back, 4096));
    CALL(cuMemcpyDtoHAsync_v2_ptsz, back, da, 256, NULL);
    CALL(cuStreamSynchronize_ptsz, NULL);
    OUT("sum_async_da", "%lu", checksum(back, 256));
    CALL(cuMemcpyDtoH_v2, back, db, 256);
    OUT("sum_async_db", "%lu", checksum(back, 256));
    CALL(cuMemcpyDtoH_v2, back, d3, 64);
    OUT("sum_async_d3", "%lu", checksum(back, 64));

    /* ---- launches ---- */
    void *params[] = {&d1};
    CUlaunchConfig cfg = {2, 1, 1, 64, 1, 1, 0, s, NULL, 0};
    CUlaunchConfig cfg_pt = {1, 1, 1, 32, 1, 1, 16, NULL, NULL, 0};
    CUlaunchConfig cfg_bad = {1, 1, 1, 4096, 1, 1, 0, s, NULL, 0};
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuLaunchKernel, quick, 4, 2, 1, 64, 2, 1, 128, NULL, params, NULL);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_LEGACY, params, NULL);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD, params, NULL);
    CALL(cuLaunchKernel, kf, 1, 1, 1, 32, 1, 1, 0, sn, params, NULL);
    CALL(cuLaunchKernel, (CUfunction)kquick, 1, 1, 1, 32, 1, 1, 0, sn, params, NULL);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 2048, 1, 1, 0, s, params, NULL);
    CALL(cuLaunchKernel, quick, 0, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuLaunchKernel, NULL, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuLaunchKernel, refused, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, (CUstream)0x1234, params, NULL);
    CALL(cuLaunchKernel_ptsz, quick, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    CALL(cuLaunchKernel_ptsz, quick, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuLaunchKernel_ptsz, quick, 1, 1, 1, 1025, 1, 1, 0, NULL, params, NULL);
    CALL(cuLaunchKernelEx, &cfg, quick, params, NULL);
    CALL(cuLaunchKernelEx, &cfg_bad, quick, params, NULL);
    CALL(cuLaunchKernelEx, NULL, quick, params, NULL);
    CALL(cuLaunchKernelEx, &cfg, refused, params, NULL);
    CALL(cuLaunchKernelEx_ptsz, &cfg_pt, quick, params, NULL);
    CALL(cuLaunchKernelEx_ptsz, NULL, quick, params, NULL);
    CALL(cuLaunchCooperativeKernel, quick, 2, 1, 1, 32, 1, 1, 0, s, params);
    CALL(cuLaunchCooperativeKernel, quick, 2, 1, 1, 32, 1, 1, 0, (CUstream)0x1234, params);
    CALL(cuLaunchCooperativeKernel_ptsz, quick, 2, 1, 1, 32, 1, 1, 0, NULL, params);
    CALL(cuLaunchCooperativeKernel_ptsz, refused, 2, 1, 1, 32, 1, 1, 0, NULL, params);
    CALL(cuCtxSynchronize);

    /* ---- events, queries, waits ---- */
    CUevent e = NULL;
    CALL(cuEventCreate, &e, 0);
    CALL(cuLaunchKernel, slow, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuEventRecord, e, s);
    CALL(cuEventQuery, e);
    CALL(cuStreamQuery, s);
    CALL(cuStreamWaitEvent, sn, e, 0);
    CALL(cuEventSynchronize, e);
    CALL(cuEventQuery, e);
    CALL(cuStreamQuery, s);
    CALL(cuStreamSynchronize, sn);
    CALL(cuEventRecord_ptsz, e, NULL);
    CALL(cuStreamWaitEvent_ptsz, NULL, e, 0);
    CALL(cuStreamSynchronize_ptsz, NULL);
    CALL(cuStreamQuery_ptsz, NULL);
    CALL(cuEventRecordWithFlags, e, s, 0);
    CALL(cuEventRecordWithFlags_ptsz, e, NULL, 0);
    CALL(cuLaunchHostFunc, s, host_fn, NULL);
    CALL(cuLaunchHostFunc_ptsz, NULL, host_fn, NULL);
    CALL(cuStreamWriteValue32, s, d1, 7, 0);
    CALL(cuStreamWriteValue32_ptsz, NULL, d1 + 4, 8, 0);
    CALL(cuStreamWriteValue32_v2, s, d1 + 1, 9, 0);
    CALL(cuStreamWriteValue32_v2_ptsz, NULL, 0x10, 9, 0);
    CALL(cuStreamWriteValue64, s, d1 + 8, 10, 0);
    CALL(cuStreamWriteValue64_ptsz, NULL, d1 + 8, 11, 0);
    CALL(cuStreamWriteValue64_v2, s, d1 + 8, 12, 0);
    CALL(cuStreamWriteValue64_v2_ptsz, (CUstream)0x1234, d1 + 8, 13, 0);
    CALL(cuStreamSynchronize, s);
    CALL(cuStreamSynchronize_ptsz, NULL);
    CALL(cuEventQuery, NULL);
    CALL(cuEventSynchronize, NULL);
    CALL(cuEventRecord, NULL, s);
    CALL(cuStreamWaitEvent, s, NULL, 0);
    CALL(cuStreamQuery, (CUstream)0x1234);
    CALL(cuStreamSynchronize, (CUstream)0x1234);
    CALL(cuStreamSynchronize, NULL);
    CALL(cuStreamSynchronize, CU_STREAM_PER_THREAD);

    /* ---- capture and graphs ---- */
    CUgraph g = NULL, g2 = NULL, g3 = NULL;
    CUgraphExec ge = NULL, ge2 = NULL;
    CUstreamCaptureStatus status = 0;
    size_t nodes = 0;
    CALL(cuStreamBeginCapture_v2, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuMemsetD8Async, d2, 3, 16, s);
    CALL(cuLaunchKernelEx, &cfg, quick, params, NULL);
    CALL(cuStreamIsCapturing, s, &status);
    OUT("capturing", "%u", (unsigned)status);
    CALL(cuStreamQuery, s);
    CALL(cuStreamEndCapture, s, &g);
    OUT("graph", "%s", norm((uintptr_t)g));
    CALL(cuGraphGetNodes, g, NULL, &nodes);
    OUT("graph_nodes", "%zu", nodes);
    CALL(cuGraphInstantiateWithFlags, &ge, g, 0);
    OUT("exec", "%s", norm((uintptr_t)ge));
    CALL(cuGraphInstantiateWithFlags, &ge2, NULL, 0);
    CALL(cuGraphInstantiateWithParams, &ge2, g, NULL);
    CALL(cuGraphInstantiateWithParams_ptsz, &ge2, g, NULL);
    CALL(cuGraphLaunch, ge, s);
    CALL(cuGraphLaunch_ptsz, ge, NULL);
    CALL(cuGraphLaunch, NULL, s);
    CALL(cuStreamSynchronize, s);
    /* Graphs built, edited, cloned, updated and destroyed by hand. */
    CUgraph gh = NULL, gc = NULL, gbad = NULL;
    CUgraphExec geh = NULL;
    CUgraphNode node = NULL, node2 = NULL;
    CUDA_KERNEL_NODE_PARAMS kp;
    CUgraphExecUpdateResultInfo info;
    memset(&kp, 0, sizeof kp);
    kp.func = quick;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 32;
    kp.blockDimY = kp.blockDimZ = 1;
    CALL(cuGraphCreate, &gh, 0);
    OUT("hand_graph", "%s", norm((uintptr_t)gh));
    CALL(cuGraphCreate, &gbad, 1);
    CALL(cuGraphAddKernelNode_v2, &node, gh, NULL, 0, &kp);
    OUT("node", "%s", norm((uintptr_t)node));
    CALL(cuGraphAddKernelNode, &node2, gh, &node, 1, &kp);
    OUT("node2", "%s", norm((uintptr_t)node2));
    CALL(cuGraphAddKernelNode_v2, &node2, NULL, NULL, 0, &kp);
    CALL(cuGraphAddKernelNode_v2, &node2, gh, NULL, 0, NULL);
    nodes = 0;
    CALL(cuGraphGetNodes, gh, NULL, &nodes);
    OUT("hand_nodes", "%zu", nodes);
    CALL(cuGraphKernelNodeSetParams_v2, node, &kp);
    CALL(cuGraphKernelNodeSetParams, node2, &kp);
    CALL(cuGraphKernelNodeSetParams_v2, (CUgraphNode)0x1234, &kp);
    CALL(cuGraphClone, &gc, gh);
    OUT("clone", "%s", norm((uintptr_t)gc));
    CALL(cuGraphClone, &gbad, NULL);
    CALL(cuGraphInstantiateWithFlags, &geh, gh, 0);
    OUT("hand_exec", "%s", norm((uintptr_t)geh));
    CALL(cuGraphExecKernelNodeSetParams_v2, geh, node, &kp);
    CALL(cuGraphExecKernelNodeSetParams, geh, node2, &kp);
    CALL(cuGraphExecKernelNodeSetParams_v2, geh, (CUgraphNode)0x1234, &kp);
    memset(&info, 0xab, sizeof info);
    CALL(cuGraphExecUpdate_v2, geh, gc, &info);
    OUT("update", "%u %s %s", (unsigned)info.result, norm((uintptr_t)info.errorNode),
        norm((uintptr_t)info.errorFromNode));
    CALL(cuGraphExecUpdate_v2, geh, g, &info);
    OUT("update", "%u", (unsigned)info.result);
    CALL(cuGraphExecUpdate_v2, geh, gc, NULL);
    CALL(cuGraphLaunch, geh, s);
    CALL(cuStreamSynchronize, s);
    char log[64];
    CALL(cuGraphInstantiate, &geh, gh, &node2, log, sizeof log);
    CALL(cuGraphInstantiate_v2, &geh, gh, &node2, log, sizeof log);
    CALL(cuGraphExecUpdate, geh, gc, &node2, &info);
    CALL(cuGraphAddChildGraphNode, &node2, gh, NULL, 0, gc);
    CALL(cuGraphAddNode, &node2, gh, NULL, 0, NULL);
    CALL(cuGraphAddNode_v2, &node2, gh, NULL, NULL, 0, NULL);
    CALL(cuGraphNodeSetParams, node, NULL);
    CALL(cuGraphExecNodeSetParams, geh, node, NULL);
    CALL(cuGraphExecChildGraphNodeSetParams, geh, node, gc);
    CALL(cuGraphNodeSetEnabled, geh, node, 0);
    CALL(cuGraphDestroyNode, node2);
    CALL(cuGraphExecDestroy, geh);
    CALL(cuGraphExecDestroy, geh);
    CALL(cuGraphDestroy, gc);
    CALL(cuGraphDestroy, gc);
    /* A potentially unsafe call during a global capture invalidates it (both ways). */
    CALL(cuStreamBeginCapture_v2, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuMemAlloc_v2, &dx, 16);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuStreamEndCapture, s, &g2);
    OUT("invalidated_graph", "%s", norm((uintptr_t)g2));
    CALL(cuStreamBeginCapture_v2_ptsz, NULL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    CALL(cuLaunchKernel_ptsz, quick, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    CALL(cuStreamEndCapture_ptsz, NULL, &g3);
    nodes = 0;
    CALL(cuGraphGetNodes, g3, NULL, &nodes);
    OUT("graph3_nodes", "%zu", nodes);
    CALL(cuStreamBeginCapture_v2, sn, CU_STREAM_CAPTURE_MODE_RELAXED);
    CALL(cuStreamBeginCapture_v2, sn, CU_STREAM_CAPTURE_MODE_RELAXED);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, sn, params, NULL);
    CALL(cuStreamEndCapture, sn, &g3);
    CALL(cuStreamEndCapture, sn, &g3);
    CALL(cuStreamBeginCapture_v2, (CUstream)0x1234, CU_STREAM_CAPTURE_MODE_GLOBAL);
    /* The CUDA 10.0 ABI (global mode): its launches, and no marker, are the graph's nodes. */
    CALL(cuStreamBeginCapture, s);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuStreamEndCapture, s, &g3);
    nodes = 0;
    CALL(cuGraphGetNodes, g3, NULL, &nodes);
    OUT("graph_v1_nodes", "%zu", nodes);
    CALL(cuStreamBeginCapture_ptsz, NULL);
    CALL(cuLaunchKernel_ptsz, quick, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    CALL(cuStreamEndCapture_ptsz, NULL, &g3);
    nodes = 0;
    CALL(cuGraphGetNodes, g3, NULL, &nodes);
    OUT("graph_v1_ptsz_nodes", "%zu", nodes);
    CALL(cuStreamBeginCaptureToGraph, s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CALL(cuStreamBeginCaptureToGraph_ptsz, NULL, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);

    /* ---- frees and stream destruction ---- */
    CALL(cuMemFreeAsync, da, s);
    CALL(cuMemFreeAsync_ptsz, db, NULL);
    CALL(cuMemFreeAsync, 0x10, s);
    CALL(cuStreamSynchronize, s);
    CALL(cuMemFree_v2, d3);
    CALL(cuMemFree_v2, d3);
    CALL(cuMemFreeHost, h1);
    CALL(cuMemFreeHost, h1);
    CALL(cuStreamDestroy_v2, sn);
    CALL(cuStreamDestroy_v2, sn);
    CALL(cuCtxSynchronize);
    CALL(cuCtxSynchronize_v2, NULL);
    CALL(cuCtxSynchronize_v2, ctx);

    /* ---- error strings before any error: the driver's own, byte for byte ---- */
    const char *text = "unset";
    CALL(cuGetErrorString, 700, &text);
    OUT("text", "%s", text ? text : "(null)");
    CALL(cuGetErrorString, 12345, &text);
    OUT("text", "%s", text ? text : "(null)");
    CALL(cuGetErrorString, 710, NULL);

    /* ---- after a sticky error every call returns it (or its own exemption) ---- */
    CALL(cuLaunchKernel, oob, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuStreamSynchronize, s);
    /* The reported code's string starts with the driver's text (cudablame appends a note to
     * it, shim-tests/tests/errstr.rs); every other code's is the driver's own. */
    text = "unset";
    CALL(cuGetErrorString, 700, &text);
    OUT("text_start", "%.40s", text ? text : "(null)");
    CALL(cuGetErrorString, 710, &text);
    OUT("text", "%s", text ? text : "(null)");
    CALL(cuCtxSynchronize);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
    CALL(cuLaunchKernel_ptsz, quick, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    CALL(cuLaunchKernelEx, &cfg, quick, params, NULL);
    CALL(cuMemcpyHtoD_v2, d1, hb, 16);
    CALL(cuMemcpyDtoH_v2_ptds, back, d1, 16);
    CALL(cuMemcpyAsync, d1, d2, 16, s);
    CALL(cuMemsetD32Async_ptsz, d1, 0, 4, NULL);
    CALL(cuMemAlloc_v2, &dx, 16);
    CALL(cuMemHostAlloc, &h1, 16, 0);
    CALL(cuModuleLoadData, &m, IMAGE);
    CALL(cuModuleGetFunction, &f, mod, "quick");
    CALL(cuEventRecord, e, s);
    CALL(cuEventQuery, e);
    CALL(cuEventSynchronize, e);
    CALL(cuStreamQuery, s);
    CALL(cuStreamQuery_ptsz, NULL);
    CALL(cuStreamWaitEvent, s, e, 0);
    CALL(cuGraphLaunch, ge, s);
    CALL(cuStreamBeginCapture_v2, s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CALL(cuStreamEndCapture, s, &g3);
    CALL(cuGraphCreate, &gc, 0);
    CALL(cuGraphAddKernelNode_v2, &node2, gh, NULL, 0, &kp);
    CALL(cuGraphExecDestroy, ge);
    CALL(cuGraphDestroy, gh);
    CALL(cuMemFree_v2, d2);
    CALL(cuStreamDestroy_v2, s);
    CALL(cuCtxSynchronize_v2, NULL);
    /* Entry points the fake driver lacks: absent through cudablame too. */
    CALL(cuMemsetD2D8_v2, d1, 16, 0, 4, 1);
    CALL(cuMemsetD2D8_v2_ptds, d1, 16, 0, 4, 1);
    CALL(cuMemsetD2D16_v2, d1, 16, 0, 4, 1);
    CALL(cuMemsetD2D16_v2_ptds, d1, 16, 0, 4, 1);
    CALL(cuMemsetD2D32_v2, d1, 16, 0, 4, 1);
    CALL(cuMemsetD2D32_v2_ptds, d1, 16, 0, 4, 1);
    CALL(cuMemsetD2D8Async, d1, 16, 0, 4, 1, NULL);
    CALL(cuMemsetD2D8Async_ptsz, d1, 16, 0, 4, 1, NULL);
    CALL(cuMemsetD2D16Async, d1, 16, 0, 4, 1, NULL);
    CALL(cuMemsetD2D16Async_ptsz, d1, 16, 0, 4, 1, NULL);
    CALL(cuMemsetD2D32Async, d1, 16, 0, 4, 1, NULL);
    CALL(cuMemsetD2D32Async_ptsz, d1, 16, 0, 4, 1, NULL);
    CALL(cuMemcpy3DPeer, NULL);
    CALL(cuMemcpy3DPeer_ptds, NULL);
    CALL(cuMemcpy3DPeerAsync, NULL, NULL);
    CALL(cuMemcpy3DPeerAsync_ptsz, NULL, NULL);
    /* ---- context life: a bad handle, the last release (destroys), a reset ---- */
    CALL(cuCtxDestroy_v2, NULL);
    CALL(cuCtxDestroy_v2, (CUcontext)0x1234);
    CALL(cuDevicePrimaryCtxRelease_v2, dev);
    CALL(cuDevicePrimaryCtxRelease_v2, 99);
    CALL(cuDevicePrimaryCtxReset_v2, dev);
    CALL(cuDevicePrimaryCtxReset_v2, 99);
    CALL(cuDevicePrimaryCtxRetain, &ctx, dev);
    CALL(cuCtxSetCurrent, ctx);
    CUcontext c2 = NULL;
    CALL(cuCtxCreate_v2, &c2, 0, dev);
    CALL(cuLaunchKernel, quick, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
    CALL(cuCtxDestroy_v2, c2);
    CALL(cuCtxDestroy_v2, c2);
    printf("calls=%d\n", calls);
    return 0;
}
