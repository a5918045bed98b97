/*
 * fake_smoke.c — checks the fake CUDA driver (shim-tests/fake-driver) on its own, without any
 * shim: entry-point routing through cuGetProcAddress_v2, asynchronous streams, sticky faults,
 * stream write-value markers, kernel names, events and stream-capture invalidation.
 *
 * Build:  gcc -O1 -o /tmp/fake_smoke shim-tests/programs/fake_smoke.c -ldl -lpthread
 * Run:    LD_LIBRARY_PATH=<dir with libfakecuda.so copied as libcuda.so.1> /tmp/fake_smoke
 * Prints "fake_smoke: N checks ok" and exits 0, or names the failing check and exits 1.
 * FAKE_CUDA_NO_STREAM_MEMOPS=1 is checked in a child, this program run as `--no-memops`.
 * shim-tests/tests/fake_driver.rs runs it.
 */
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

static int checks;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "fake_smoke: FAILED (line %d): %s: ", __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
            exit(1);                                                                          \
        }                                                                                     \
        checks++;                                                                             \
    } while (0)

#define CHECK_RC(call, want)                                                                  \
    do {                                                                                      \
        CUresult rc_ = (call);                                                                \
        CHECK(rc_ == (CUresult)(want), "%s returned %d, expected %d", #call, (int)rc_,        \
              (int)(want));                                                                   \
    } while (0)

/* Kernel behaviour is described by "// fake:" lines (see the fake driver's lib.rs). */
static const char *IMAGE =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    ".visible .entry slow_kernel(\n"
    "    .param .u64 slow_kernel_param_0\n"
    ")\n"
    "{\n"
    "    ret;\n"
    "}\n"
    ".visible .entry fault_kernel(\n"
    "    .param .u64 fault_kernel_param_0\n"
    ")\n"
    "{\n"
    "    ret;\n"
    "}\n"
    ".visible .entry fast_kernel()\n{\n    ret;\n}\n"
    ".visible .entry bad_launch()\n{\n    ret;\n}\n"
    ".visible .entry second_faults()\n{\n    ret;\n}\n"
    "// fake: slow_kernel delay_us=300000\n"
    "// fake: fault_kernel fault=700\n"
    "// fake: fast_kernel delay_us=1000\n"
    "// fake: bad_launch launch_error=701\n"
    "// fake: second_faults fault=716 fault_on=2\n";

static void *lib;
static PFN_cuGetProcAddress getProc;

/* Entry points, all resolved through cuGetProcAddress_v2 (CUDA 13.0, legacy stream). */
static struct {
    PFN_cuInit Init;
    PFN_cuDriverGetVersion DriverGetVersion;
    PFN_cuGetErrorName GetErrorName;
    PFN_cuGetErrorString GetErrorString;
    PFN_cuDeviceGetCount DeviceGetCount;
    PFN_cuDeviceGet DeviceGet;
    PFN_cuDeviceGetName DeviceGetName;
    PFN_cuDeviceGetAttribute DeviceGetAttribute;
    PFN_cuCtxCreate_v12050 CtxCreate;
    PFN_cuCtxDestroy CtxDestroy;
    PFN_cuCtxSetCurrent CtxSetCurrent;
    PFN_cuCtxGetCurrent CtxGetCurrent;
    PFN_cuCtxGetDevice CtxGetDevice;
    PFN_cuCtxSynchronize CtxSynchronize;
    PFN_cuModuleLoadData ModuleLoadData;
    PFN_cuModuleGetFunction ModuleGetFunction;
    PFN_cuLibraryLoadData LibraryLoadData;
    PFN_cuLibraryGetKernel LibraryGetKernel;
    PFN_cuFuncGetName FuncGetName;
    PFN_cuKernelGetName KernelGetName;
    PFN_cuLaunchKernel LaunchKernel;
    PFN_cuLaunchKernel LaunchKernelPtsz;
    PFN_cuLaunchKernelEx LaunchKernelEx;
    PFN_cuMemAlloc MemAlloc;
    PFN_cuMemFree MemFree;
    PFN_cuMemHostAlloc MemHostAlloc;
    PFN_cuMemFreeHost MemFreeHost;
    PFN_cuMemHostGetDevicePointer MemHostGetDevicePointer;
    PFN_cuMemcpyHtoD MemcpyHtoD;
    PFN_cuMemcpyDtoH MemcpyDtoH;
    PFN_cuMemsetD32Async MemsetD32Async;
    PFN_cuStreamCreate StreamCreate;
    PFN_cuStreamDestroy StreamDestroy;
    PFN_cuStreamSynchronize StreamSynchronize;
    PFN_cuStreamQuery StreamQuery;
    PFN_cuStreamWaitEvent StreamWaitEvent;
    PFN_cuStreamWriteValue64 StreamWriteValue64;
    PFN_cuEventCreate EventCreate;
    PFN_cuEventRecord EventRecord;
    PFN_cuEventQuery EventQuery;
    PFN_cuEventSynchronize EventSynchronize;
    PFN_cuEventDestroy EventDestroy;
    PFN_cuStreamBeginCapture StreamBeginCapture;
    PFN_cuStreamEndCapture StreamEndCapture;
    PFN_cuStreamIsCapturing StreamIsCapturing;
    PFN_cuThreadExchangeStreamCaptureMode ThreadExchangeStreamCaptureMode;
    PFN_cuGraphInstantiateWithFlags GraphInstantiateWithFlags;
    PFN_cuGraphLaunch GraphLaunch;
    PFN_cuGraphGetNodes GraphGetNodes;
    PFN_cuGraphDestroy GraphDestroy;
    PFN_cuGraphExecDestroy GraphExecDestroy;
} cu;

static void *resolve(const char *symbol, int version, cuuint64_t flags) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)99;
    CUresult rc = getProc(symbol, &fn, version, flags, &status);
    CHECK(rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS && fn != NULL,
          "cuGetProcAddress_v2(%s, %d, %llu): rc %d status %d", symbol, version,
          (unsigned long long)flags, (int)rc, (int)status);
    return fn;
}

static void *export_of(const char *name) {
    void *fn = dlsym(lib, name);
    CHECK(fn != NULL, "dlsym(%s): %s", name, dlerror());
    return fn;
}

#define GET(field, symbol) cu.field = (__typeof__(cu.field))resolve(symbol, 13000, 0)

static void resolve_all(void) {
    GET(Init, "cuInit");
    GET(DriverGetVersion, "cuDriverGetVersion");
    GET(GetErrorName, "cuGetErrorName");
    GET(GetErrorString, "cuGetErrorString");
    GET(DeviceGetCount, "cuDeviceGetCount");
    GET(DeviceGet, "cuDeviceGet");
    GET(DeviceGetName, "cuDeviceGetName");
    GET(DeviceGetAttribute, "cuDeviceGetAttribute");
    GET(CtxCreate, "cuCtxCreate");
    GET(CtxDestroy, "cuCtxDestroy");
    GET(CtxSetCurrent, "cuCtxSetCurrent");
    GET(CtxGetCurrent, "cuCtxGetCurrent");
    GET(CtxGetDevice, "cuCtxGetDevice");
    GET(CtxSynchronize, "cuCtxSynchronize");
    GET(ModuleLoadData, "cuModuleLoadData");
    GET(ModuleGetFunction, "cuModuleGetFunction");
    GET(LibraryLoadData, "cuLibraryLoadData");
    GET(LibraryGetKernel, "cuLibraryGetKernel");
    GET(FuncGetName, "cuFuncGetName");
    GET(KernelGetName, "cuKernelGetName");
    GET(LaunchKernel, "cuLaunchKernel");
    cu.LaunchKernelPtsz = (PFN_cuLaunchKernel)resolve("cuLaunchKernel", 13000,
                                                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    GET(LaunchKernelEx, "cuLaunchKernelEx");
    GET(MemAlloc, "cuMemAlloc");
    GET(MemFree, "cuMemFree");
    GET(MemHostAlloc, "cuMemHostAlloc");
    GET(MemFreeHost, "cuMemFreeHost");
    GET(MemHostGetDevicePointer, "cuMemHostGetDevicePointer");
    GET(MemcpyHtoD, "cuMemcpyHtoD");
    GET(MemcpyDtoH, "cuMemcpyDtoH");
    GET(MemsetD32Async, "cuMemsetD32Async");
    GET(StreamCreate, "cuStreamCreate");
    GET(StreamDestroy, "cuStreamDestroy");
    GET(StreamSynchronize, "cuStreamSynchronize");
    GET(StreamQuery, "cuStreamQuery");
    GET(StreamWaitEvent, "cuStreamWaitEvent");
    GET(StreamWriteValue64, "cuStreamWriteValue64");
    GET(EventCreate, "cuEventCreate");
    GET(EventRecord, "cuEventRecord");
    GET(EventQuery, "cuEventQuery");
    GET(EventSynchronize, "cuEventSynchronize");
    GET(EventDestroy, "cuEventDestroy");
    GET(StreamBeginCapture, "cuStreamBeginCapture");
    GET(StreamEndCapture, "cuStreamEndCapture");
    GET(StreamIsCapturing, "cuStreamIsCapturing");
    GET(ThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode");
    GET(GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    GET(GraphLaunch, "cuGraphLaunch");
    GET(GraphGetNodes, "cuGraphGetNodes");
    GET(GraphDestroy, "cuGraphDestroy");
    GET(GraphExecDestroy, "cuGraphExecDestroy");
}

/* ---- entry-point routing ------------------------------------------------------------------ */

static void check_routing(void) {
    const cuuint64_t PT = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    void *plain = resolve("cuLaunchKernel", 13000, 0);
    void *ptsz = resolve("cuLaunchKernel", 13000, PT);
    CHECK(plain != ptsz, "plain and per-thread cuLaunchKernel must differ");
    CHECK(plain == export_of("cuLaunchKernel"), "flag 0 gives cuLaunchKernel");
    CHECK(ptsz == export_of("cuLaunchKernel_ptsz"), "flag 2 gives cuLaunchKernel_ptsz");
    CHECK(resolve("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) == plain,
          "flag 1 gives the plain variant");
    CHECK(resolve("cuLaunchKernel_ptsz", 13000, 0) == ptsz, "explicit suffix is literal");
    CHECK(resolve("cuMemcpyHtoD", 13000, PT) == export_of("cuMemcpyHtoD_v2_ptds"),
          "cuMemcpyHtoD + flag 2 -> _v2_ptds");
    CHECK(resolve("cuMemcpyHtoD", 13000, 0) == export_of("cuMemcpyHtoD_v2"),
          "cuMemcpyHtoD -> _v2");
    CHECK(resolve("cuStreamWriteValue64", 12000, PT) == export_of("cuStreamWriteValue64_v2_ptsz"),
          "cuStreamWriteValue64 @12000 + flag 2 -> _v2_ptsz");
    CHECK(resolve("cuStreamWriteValue64", 11000, 0) == export_of("cuStreamWriteValue64"),
          "cuStreamWriteValue64 @11000 -> v1");
    CHECK(resolve("cuStreamWriteValue64", 8000, 0) == export_of("cuStreamWriteValue64"),
          "cuStreamWriteValue64 @8000 -> v1");
    CHECK(resolve("cuGetProcAddress", 12000, 0) == (void *)getProc,
          "cuGetProcAddress @12000 -> _v2");
    CHECK(resolve("cuGetProcAddress", 11030, 0) == export_of("cuGetProcAddress"),
          "cuGetProcAddress @11030 -> v1");
    CHECK(resolve("cuStreamBeginCapture", 13000, 0) == export_of("cuStreamBeginCapture_v2"),
          "cuStreamBeginCapture -> _v2");

    void *fn = (void *)1;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CHECK_RC(getProc("cuNoSuchFunction", &fn, 13000, 0, &status), CUDA_SUCCESS);
    CHECK(fn == NULL && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
          "unknown symbol: fn %p status %d", fn, (int)status);
    fn = (void *)1;
    CHECK_RC(getProc("cuLaunchKernelEx", &fn, 11000, 0, &status), CUDA_SUCCESS);
    CHECK(fn == NULL && status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
          "cuLaunchKernelEx @11000: fn %p status %d", fn, (int)status);
    CHECK_RC(getProc("cuLaunchKernelEx", &fn, 11060, 0, NULL), CUDA_SUCCESS);
    CHECK(fn == export_of("cuLaunchKernelEx"), "cuLaunchKernelEx @11060 (NULL status)");

    PFN_cuGetProcAddress_v1 getProcV1 = (PFN_cuGetProcAddress_v1)export_of("cuGetProcAddress");
    CHECK_RC(getProcV1("cuNoSuchFunction", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
    CHECK_RC(getProcV1("cuInit", &fn, 13000, 0), CUDA_SUCCESS);
    CHECK(fn == export_of("cuInit"), "v1 resolves cuInit");
}

/* ---- helpers ------------------------------------------------------------------------------ */

static CUresult launch(CUfunction f, CUstream s) {
    return cu.LaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
}

static CUfunction get_function(CUmodule m, const char *name) {
    CUfunction f = NULL;
    CHECK_RC(cu.ModuleGetFunction(&f, m, name), CUDA_SUCCESS);
    CHECK(f != NULL, "function %s", name);
    return f;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct thread_arg {
    CUcontext ctx;
    CUresult alloc_rc;
};

static void *alloc_from_other_thread(void *p) {
    struct thread_arg *arg = p;
    CUdeviceptr d = 0;
    if (cu.CtxSetCurrent(arg->ctx) != CUDA_SUCCESS) {
        arg->alloc_rc = (CUresult)-1;
        return NULL;
    }
    arg->alloc_rc = cu.MemAlloc(&d, 16);
    if (arg->alloc_rc == CUDA_SUCCESS) {
        cu.MemFree(d);
    }
    return NULL;
}

static CUresult alloc_in_thread(CUcontext ctx) {
    pthread_t t;
    struct thread_arg arg = {ctx, (CUresult)-1};
    CHECK(pthread_create(&t, NULL, alloc_from_other_thread, &arg) == 0, "pthread_create");
    pthread_join(t, NULL);
    return arg.alloc_rc;
}

/* ---- healthy context: module, memory, streams, events, capture ----------------------------- */

static void check_healthy(CUcontext ctx, CUmodule mod) {
    CUfunction slow = get_function(mod, "slow_kernel");
    CUfunction fast = get_function(mod, "fast_kernel");
    CUfunction bad = get_function(mod, "bad_launch");
    CUfunction again = NULL;
    CHECK_RC(cu.ModuleGetFunction(&again, mod, "slow_kernel"), CUDA_SUCCESS);
    CHECK(again == slow, "same name, same handle");
    CHECK_RC(cu.ModuleGetFunction(&again, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);

    const char *name = NULL;
    CHECK_RC(cu.FuncGetName(&name, slow), CUDA_SUCCESS);
    CHECK(name && strcmp(name, "slow_kernel") == 0, "cuFuncGetName: %s", name);

    CUmodule broken = NULL;
    CHECK_RC(cu.ModuleLoadData(&broken, "// fake: module_error=218\n"), 218);

    CUlibrary libh = NULL;
    CUkernel kern = NULL;
    CHECK_RC(cu.LibraryLoadData(&libh, IMAGE, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
    CHECK_RC(cu.LibraryGetKernel(&kern, libh, "fault_kernel"), CUDA_SUCCESS);
    CHECK_RC(cu.KernelGetName(&name, kern), CUDA_SUCCESS);
    CHECK(name && strcmp(name, "fault_kernel") == 0, "cuKernelGetName: %s", name);
    CHECK_RC(cu.LibraryGetKernel(&kern, libh, "nope"), CUDA_ERROR_NOT_FOUND);

    /* Synchronous launch errors leave the context healthy. */
    CHECK_RC(launch(bad, NULL), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    CHECK_RC(cu.LaunchKernel(fast, 0, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.LaunchKernel(fast, 1, 1, 1, 2048, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.LaunchKernel(fast, 1, 1, 1, 32, 64, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.CtxSynchronize(), CUDA_SUCCESS);

    CUstream s = NULL, s2 = NULL;
    CHECK_RC(cu.StreamCreate(&s, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    CHECK_RC(cu.StreamCreate(&s2, CU_STREAM_DEFAULT), CUDA_SUCCESS);

    /* Real copies; the legacy-stream copy waits for earlier work on blocking stream s. */
    CUdeviceptr d = 0;
    unsigned int host[16], back[16];
    for (int i = 0; i < 16; i++) host[i] = (unsigned int)i * 3u;
    CHECK_RC(cu.MemAlloc(&d, sizeof host), CUDA_SUCCESS);
    CHECK_RC(cu.MemcpyHtoD(d, host, sizeof host), CUDA_SUCCESS);
    CHECK_RC(cu.MemcpyDtoH(back, d, sizeof back), CUDA_SUCCESS);
    CHECK(memcmp(host, back, sizeof host) == 0, "HtoD/DtoH round trip");
    CHECK_RC(launch(slow, s), CUDA_SUCCESS);
    CHECK_RC(cu.MemsetD32Async(d, 0xabcdu, 16, s), CUDA_SUCCESS);
    CHECK_RC(cu.StreamQuery(s), CUDA_ERROR_NOT_READY);
    CHECK_RC(cu.MemcpyDtoH(back, d, sizeof back), CUDA_SUCCESS);
    CHECK(back[0] == 0xabcdu && back[15] == 0xabcdu, "memset on s visible to legacy copy: %x", back[0]);
    CHECK_RC(cu.StreamQuery(s), CUDA_SUCCESS);

    /* Per-thread default stream routing: the _ptsz launch with NULL goes to the per-thread stream. */
    CHECK_RC(cu.LaunchKernelPtsz(slow, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    CHECK_RC(cu.StreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
    CHECK_RC(cu.StreamQuery(CU_STREAM_LEGACY), CUDA_SUCCESS);
    CHECK_RC(cu.StreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    CHECK_RC(cu.StreamQuery(CU_STREAM_PER_THREAD), CUDA_SUCCESS);

    /* cuLaunchKernelEx on a user stream. */
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 128;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    CHECK_RC(cu.LaunchKernelEx(&cfg, slow, NULL, NULL), CUDA_SUCCESS);
    CHECK_RC(cu.StreamQuery(s), CUDA_ERROR_NOT_READY);

    /* Events; a stream waiting on an event recorded after a slow kernel. */
    CUevent ev = NULL;
    void *pinned = NULL;
    CUdeviceptr marker = 0;
    CHECK_RC(cu.MemHostAlloc(&pinned, 64, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    CHECK_RC(cu.MemHostGetDevicePointer(&marker, pinned, 0), CUDA_SUCCESS);
    volatile unsigned long long *m = pinned;
    CHECK_RC(cu.EventCreate(&ev, CU_EVENT_DEFAULT), CUDA_SUCCESS);
    CHECK_RC(cu.EventRecord(ev, s), CUDA_SUCCESS);
    CHECK_RC(cu.EventQuery(ev), CUDA_ERROR_NOT_READY);
    CHECK_RC(cu.StreamWaitEvent(s2, ev, 0), CUDA_SUCCESS);
    CHECK_RC(cu.StreamWriteValue64(s2, marker, 3, 0), CUDA_SUCCESS);
    CHECK_RC(cu.StreamSynchronize(s2), CUDA_SUCCESS);
    CHECK(m[0] == 3, "marker after s2 sync: %llu", (unsigned long long)m[0]);
    CHECK_RC(cu.EventQuery(ev), CUDA_SUCCESS);
    CHECK_RC(cu.EventSynchronize(ev), CUDA_SUCCESS);
    m[0] = 0;

    /* Capture A: cuMemAlloc during a GLOBAL capture invalidates it. */
    CUstreamCaptureStatus st;
    CUgraph graph = (CUgraph)1;
    CUdeviceptr tmp = 0;
    CHECK_RC(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_RC(cu.StreamIsCapturing(s, &st), CUDA_SUCCESS);
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capturing: %d", (int)st);
    CHECK_RC(launch(fast, s), CUDA_SUCCESS);
    CHECK_RC(cu.MemAlloc(&tmp, 16), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_RC(cu.StreamIsCapturing(s, &st), CUDA_SUCCESS);
    CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED, "invalidated: %d", (int)st);
    CHECK_RC(cu.StreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(graph == NULL, "no graph from an invalidated capture");
    CHECK_RC(cu.StreamIsCapturing(s, &st), CUDA_SUCCESS);
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE, "capture ended: %d", (int)st);

    /* Capture B: the same allocation with thread mode RELAXED is fine; the graph replays. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CHECK_RC(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_RC(cu.ThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
    CHECK(mode == CU_STREAM_CAPTURE_MODE_GLOBAL, "previous mode GLOBAL: %d", (int)mode);
    CHECK_RC(cu.MemAlloc(&tmp, 16), CUDA_SUCCESS);
    CHECK_RC(cu.ThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
    CHECK(mode == CU_STREAM_CAPTURE_MODE_RELAXED, "previous mode RELAXED: %d", (int)mode);
    CHECK_RC(launch(fast, s), CUDA_SUCCESS);
    CHECK_RC(cu.StreamWriteValue64(s, marker, 7, 0), CUDA_SUCCESS);
    CHECK_RC(cu.StreamEndCapture(s, &graph), CUDA_SUCCESS);
    CHECK(graph != NULL, "graph");
    CHECK(m[0] == 0, "captured write did not execute: %llu", (unsigned long long)m[0]);
    size_t n = 0;
    CHECK_RC(cu.GraphGetNodes(graph, NULL, &n), CUDA_SUCCESS);
    CHECK(n == 2, "2 captured nodes, got %zu", n);
    CUgraphExec exec = NULL;
    CHECK_RC(cu.GraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    CHECK_RC(cu.GraphLaunch(exec, s), CUDA_SUCCESS);
    CHECK_RC(cu.StreamSynchronize(s), CUDA_SUCCESS);
    CHECK(m[0] == 7, "graph replay wrote the marker: %llu", (unsigned long long)m[0]);
    CHECK_RC(cu.GraphExecDestroy(exec), CUDA_SUCCESS);
    CHECK_RC(cu.GraphDestroy(graph), CUDA_SUCCESS);
    CHECK_RC(cu.MemFree(tmp), CUDA_SUCCESS);

    /* Capture C: another thread (default mode GLOBAL) allocating invalidates a GLOBAL capture... */
    CHECK_RC(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_RC(alloc_in_thread(ctx), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_RC(cu.StreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* ... but not a THREAD_LOCAL one. */
    CHECK_RC(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    CHECK_RC(alloc_in_thread(ctx), CUDA_SUCCESS);
    CHECK_RC(cu.StreamEndCapture(s, &graph), CUDA_SUCCESS);
    CHECK_RC(cu.GraphDestroy(graph), CUDA_SUCCESS);

    /* Capture D: launching onto the legacy stream while blocking stream s captures. */
    CHECK_RC(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_RC(launch(fast, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CHECK_RC(cu.StreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* Capture E: synchronizing the capturing stream itself. */
    CHECK_RC(cu.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_RC(cu.StreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_RC(cu.StreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    CHECK_RC(cu.CtxSynchronize(), CUDA_SUCCESS);
    CHECK_RC(cu.EventDestroy(ev), CUDA_SUCCESS);
    CHECK_RC(cu.MemFreeHost(pinned), CUDA_SUCCESS);
    CHECK_RC(cu.MemFree(d), CUDA_SUCCESS);
    CHECK_RC(cu.StreamDestroy(s), CUDA_SUCCESS);
    CHECK_RC(cu.StreamDestroy(s2), CUDA_SUCCESS);
}

/* ---- the asynchronous fault scenario --------------------------------------------------------- */

static void check_fault(CUcontext ctx, CUmodule mod) {
    CUfunction slow = get_function(mod, "slow_kernel");
    CUfunction fault = get_function(mod, "fault_kernel");
    CUstream st = NULL;
    CUdeviceptr dbuf = 0, marker = 0;
    void *pinned = NULL;
    char host[16];

    CHECK_RC(cu.StreamCreate(&st, CU_STREAM_DEFAULT), CUDA_SUCCESS);
    CHECK_RC(cu.MemAlloc(&dbuf, sizeof host), CUDA_SUCCESS);
    CHECK_RC(cu.MemHostAlloc(&pinned, 64, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    CHECK_RC(cu.MemHostGetDevicePointer(&marker, pinned, 0), CUDA_SUCCESS);
    CHECK(marker == (CUdeviceptr)(uintptr_t)pinned, "pinned device pointer is the host pointer");
    volatile unsigned long long *m = pinned;
    CHECK(m[0] == 0, "pinned memory starts zeroed");

    double t0 = now_ms();
    CHECK_RC(launch(slow, st), CUDA_SUCCESS);
    CHECK_RC(cu.StreamWriteValue64(st, marker, 1, 0), CUDA_SUCCESS);
    CHECK_RC(launch(fault, st), CUDA_SUCCESS); /* asynchronous: the fault happens later */
    CHECK_RC(cu.StreamWriteValue64(st, marker, 2, 0), CUDA_SUCCESS);
    CHECK_RC(launch(slow, st), CUDA_SUCCESS);
    CHECK(now_ms() - t0 < 250, "launches returned immediately (%.0f ms)", now_ms() - t0);
    CHECK_RC(cu.StreamQuery(st), CUDA_ERROR_NOT_READY);

    CHECK_RC(cu.MemcpyDtoH(host, dbuf, sizeof host), CUDA_ERROR_ILLEGAL_ADDRESS);
    double waited = now_ms() - t0;
    CHECK(waited >= 250 && waited < 5000, "the copy waited for the slow kernel (%.0f ms)", waited);
    CHECK(m[0] == 1, "marker is 1 (the write after the fault was discarded): %llu",
          (unsigned long long)m[0]);

    const char *name = NULL;
    CHECK_RC(cu.FuncGetName(&name, fault), CUDA_SUCCESS);
    CHECK(name && strcmp(name, "fault_kernel") == 0, "cuFuncGetName after the fault: %s", name);

    /* Sticky: everything on this context now reports 700 ... */
    CHECK_RC(launch(slow, st), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(cu.StreamWriteValue64(st, marker, 3, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(cu.StreamSynchronize(st), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(cu.StreamQuery(st), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(cu.CtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CUdeviceptr more = 0;
    CHECK_RC(cu.MemAlloc(&more, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK(m[0] == 1, "marker still 1");

    /* ... except the calls that keep working. */
    CUcontext cur = NULL;
    CUdevice dev = -1;
    CHECK_RC(cu.CtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == ctx, "still current");
    CHECK_RC(cu.CtxGetDevice(&dev), CUDA_SUCCESS);
    CHECK(dev == 0, "device 0");
    CHECK_RC(cu.GetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &name), CUDA_SUCCESS);
    CHECK(strcmp(name, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0, "%s", name);
    CHECK_RC(cu.MemFreeHost(pinned), CUDA_SUCCESS);
    CHECK_RC(cu.StreamDestroy(st), CUDA_SUCCESS);
}

/* fault_on=2: the first execution succeeds, the second poisons the context. */
static void check_fault_on(CUmodule mod) {
    CUfunction second = get_function(mod, "second_faults");
    CHECK_RC(launch(second, NULL), CUDA_SUCCESS);
    CHECK_RC(cu.CtxSynchronize(), CUDA_SUCCESS);
    CHECK_RC(launch(second, NULL), CUDA_SUCCESS);
    CHECK_RC(cu.CtxSynchronize(), CUDA_ERROR_MISALIGNED_ADDRESS);
    CHECK_RC(launch(second, NULL), CUDA_ERROR_MISALIGNED_ADDRESS);
}

static void open_driver(void) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL, "dlopen(libcuda.so.1): %s", dlerror());
    getProc = (PFN_cuGetProcAddress)export_of("cuGetProcAddress_v2");
}

/* ---- FAKE_CUDA_NO_STREAM_MEMOPS=1, in a child process ---------------------------------------- */

/* The child (`fake_smoke --no-memops`, run with FAKE_CUDA_NO_STREAM_MEMOPS=1): the stream-mem-op
 * attributes read 0 and cuStreamWriteValue64 returns CUDA_ERROR_NOT_SUPPORTED. */
static int no_memops_main(void) {
    open_driver();
    resolve_all();
    CUdevice dev = -1;
    CUcontext ctx = NULL;
    void *pinned = NULL;
    CUdeviceptr marker = 0;
    int value = -1;
    CHECK_RC(cu.Init(0), CUDA_SUCCESS);
    CHECK_RC(cu.DeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_RC(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, dev), CUDA_SUCCESS);
    CHECK(value == 0, "stream mem ops %d", value);
    CHECK_RC(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev), CUDA_SUCCESS);
    CHECK(value == 0, "64-bit stream mem ops %d", value);
    CHECK_RC(cu.CtxCreate(&ctx, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_RC(cu.MemHostAlloc(&pinned, 64, 0), CUDA_SUCCESS);
    CHECK_RC(cu.MemHostGetDevicePointer(&marker, pinned, 0), CUDA_SUCCESS);
    CHECK_RC(cu.StreamWriteValue64(NULL, marker, 1, 0), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_RC(cu.StreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(*(volatile unsigned long long *)pinned == 0, "nothing written");
    CHECK_RC(cu.MemFreeHost(pinned), CUDA_SUCCESS);
    CHECK_RC(cu.CtxDestroy(ctx), CUDA_SUCCESS);
    printf("fake_smoke --no-memops: %d checks ok\n", checks);
    return 0;
}

/* Runs this program again as `--no-memops` with FAKE_CUDA_NO_STREAM_MEMOPS=1; its exit status. */
static int run_no_memops_child(void) {
    extern char **environ;
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof *env);
    CHECK(env != NULL, "calloc");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "FAKE_CUDA_NO_STREAM_MEMOPS=", 27) != 0) env[k++] = environ[i];
    env[k++] = "FAKE_CUDA_NO_STREAM_MEMOPS=1";
    env[k] = NULL;
    char *args[] = {"fake_smoke", "--no-memops", NULL};
    fflush(stdout);
    pid_t pid = -1;
    int err = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, env);
    free(env);
    CHECK(err == 0, "posix_spawn: %s", strerror(err));
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--no-memops") == 0) return no_memops_main();
    open_driver();

    check_routing(); /* cuGetProcAddress works before cuInit */
    resolve_all();

    int count = 0;
    CHECK_RC(cu.DeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
    const char *text = NULL;
    CHECK_RC(cu.GetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &text), CUDA_SUCCESS);
    CHECK(strcmp(text, "CUDA_ERROR_ILLEGAL_ADDRESS") == 0, "%s", text);
    CHECK_RC(cu.GetErrorString(CUDA_ERROR_ASSERT, &text), CUDA_SUCCESS);
    CHECK(strcmp(text, "device-side assert triggered") == 0, "%s", text);
    CHECK_RC(cu.GetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &text), CUDA_SUCCESS);
    CHECK(strcmp(text, "an illegal memory access was encountered") == 0, "%s", text);
    CHECK_RC(cu.GetErrorName((CUresult)12345, &text), CUDA_ERROR_INVALID_VALUE);

    CHECK_RC(cu.Init(0), CUDA_SUCCESS);
    int version = 0;
    CHECK_RC(cu.DriverGetVersion(&version), CUDA_SUCCESS);
    CHECK(version == 13000, "driver version %d", version);
    CHECK_RC(cu.DeviceGetCount(&count), CUDA_SUCCESS);
    if (getenv("FAKE_CUDA_DEVICES") == NULL) CHECK(count == 2, "2 devices, got %d", count);
    CUdevice dev = -1;
    CHECK_RC(cu.DeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_RC(cu.DeviceGet(&dev, count), CUDA_ERROR_INVALID_DEVICE);
    CHECK_RC(cu.DeviceGet(&dev, 0), CUDA_SUCCESS);
    char devname[64];
    CHECK_RC(cu.DeviceGetName(devname, sizeof devname, dev), CUDA_SUCCESS);
    CHECK(strcmp(devname, "Fake GPU 0") == 0, "device name %s", devname);
    int value = -1;
    CHECK_RC(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), CUDA_SUCCESS);
    CHECK(value == 9, "cc major %d", value);
    CHECK_RC(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, dev), CUDA_SUCCESS);
    CHECK(value == 1, "can map host memory %d", value);
    CHECK_RC(cu.DeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev), CUDA_SUCCESS);
    CHECK(value == 1, "64-bit stream mem ops %d", value);

    CUcontext none = (CUcontext)1;
    CHECK_RC(cu.CtxGetCurrent(&none), CUDA_SUCCESS);
    CHECK(none == NULL, "no current context yet");
    CUdeviceptr d = 0;
    CHECK_RC(cu.MemAlloc(&d, 16), CUDA_ERROR_INVALID_CONTEXT);

    CUcontext faulty = NULL, healthy = NULL, sibling = NULL, third = NULL;
    CUmodule mod_faulty = NULL, mod_healthy = NULL, mod_third = NULL;
    CUdevice dev1 = -1;
    CHECK_RC(cu.DeviceGet(&dev1, 1), CUDA_SUCCESS);
    CHECK_RC(cu.CtxCreate(&sibling, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_RC(cu.CtxCreate(&faulty, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_RC(cu.ModuleLoadData(&mod_faulty, IMAGE), CUDA_SUCCESS);
    CHECK_RC(cu.CtxCreate(&healthy, NULL, 0, dev1), CUDA_SUCCESS);
    CHECK_RC(cu.ModuleLoadData(&mod_healthy, IMAGE), CUDA_SUCCESS);

    check_healthy(healthy, mod_healthy);

    CHECK_RC(cu.CtxSetCurrent(faulty), CUDA_SUCCESS);
    check_fault(faulty, mod_faulty);

    /* A context of another device is unaffected by the fault. */
    CHECK_RC(cu.CtxSetCurrent(healthy), CUDA_SUCCESS);
    CHECK_RC(cu.MemAlloc(&d, 16), CUDA_SUCCESS);
    CHECK_RC(cu.MemFree(d), CUDA_SUCCESS);
    CHECK_RC(cu.CtxSynchronize(), CUDA_SUCCESS);

    /* Another context of the faulting device returns its error (as on the H200). */
    CHECK_RC(cu.CtxSetCurrent(sibling), CUDA_SUCCESS);
    CHECK_RC(cu.MemAlloc(&d, 16), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(cu.CtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);

    /* A context created after the fault is healthy (the real driver 580 refuses it). */
    CHECK_RC(cu.CtxCreate(&third, NULL, 0, dev), CUDA_SUCCESS);
    CHECK_RC(cu.ModuleLoadData(&mod_third, IMAGE), CUDA_SUCCESS);
    check_fault_on(mod_third);

    /* Stream memory operations can be switched off (in a child process: the fake reads
     * FAKE_CUDA_NO_STREAM_MEMOPS once, as a device property that does not change). */
    CHECK(run_no_memops_child() == 0, "the FAKE_CUDA_NO_STREAM_MEMOPS=1 child failed");
    CHECK_RC(cu.CtxSetCurrent(healthy), CUDA_SUCCESS);
    void *pinned = NULL;
    CUdeviceptr marker = 0;
    CHECK_RC(cu.MemHostAlloc(&pinned, 64, 0), CUDA_SUCCESS);
    CHECK_RC(cu.MemHostGetDevicePointer(&marker, pinned, 0), CUDA_SUCCESS);
    CHECK_RC(cu.StreamWriteValue64(NULL, marker, 9, 0), CUDA_SUCCESS);
    CHECK_RC(cu.StreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(*(volatile unsigned long long *)pinned == 9, "legacy-stream write");
    CHECK_RC(cu.StreamWriteValue64(NULL, marker + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.MemFreeHost(pinned), CUDA_SUCCESS);

    /* Destroying a poisoned context returns its sticky error and destroys it all the same. */
    CHECK_RC(cu.CtxDestroy(third), CUDA_ERROR_MISALIGNED_ADDRESS);
    CHECK_RC(cu.CtxDestroy(sibling), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(cu.CtxDestroy(faulty), CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK_RC(cu.CtxDestroy(healthy), CUDA_SUCCESS);
    CHECK_RC(cu.CtxDestroy(faulty), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_RC(cu.CtxSetCurrent(third), CUDA_ERROR_INVALID_CONTEXT);

    printf("fake_smoke: %d checks ok\n", checks);
    return 0;
}
