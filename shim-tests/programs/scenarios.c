/* Faulty programs for the shim's integration tests, run against the fake driver.
 *
 * Usage: scenarios [--ptds] [--dlsym] SCENARIO
 * Reaches the driver like the static CUDA runtime (dlopen("libcuda.so.1") + dlsym of
 * "cuGetProcAddress_v2", everything else through it; --ptds asks for per-thread default stream
 * variants), like Triton (--dlsym: dlsym of each exported name), or, when compiled with
 * -DLINKED -lcuda, by direct calls to the driver's symbols.
 *
 * Every culprit is launched from launch_bad_kernel() (the name the tests look for in the launch
 * stack); the program prints key=value lines (rc of the reporting call, pid, tids) and exits with
 * 0 on success or 1 when the CUDA error came back, like a real program would. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef unsigned int CUresult;
typedef void *CUcontext, *CUstream, *CUfunction, *CUmodule, *CUgraph, *CUgraphExec, *CUgraphNode;
typedef unsigned long long CUdeviceptr;
typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    void *attrs;
    unsigned numAttrs;
} CUlaunchConfig;

/* name used with cuGetProcAddress, exported name (for dlsym / direct link), return, params */
#define DRIVER_FUNCTIONS(X)                                                                        \
    X(cuInit, cuInit, (unsigned))                                                                  \
    X(cuDeviceGet, cuDeviceGet, (int *, int))                                                      \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, (CUcontext *, int))                      \
    X(cuCtxSetCurrent, cuCtxSetCurrent, (CUcontext))                                               \
    X(cuModuleLoadData, cuModuleLoadData, (CUmodule *, const void *))                              \
    X(cuModuleGetFunction, cuModuleGetFunction, (CUfunction *, CUmodule, const char *))            \
    X(cuMemAlloc, cuMemAlloc_v2, (CUdeviceptr *, size_t))                                          \
    X(cuMemcpyHtoD, cuMemcpyHtoD_v2, (CUdeviceptr, const void *, size_t))                          \
    X(cuMemcpyDtoH, cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                \
    X(cuLaunchKernel, cuLaunchKernel,                                                              \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, \
       void **, void **))                                                                          \
    X(cuLaunchKernelEx, cuLaunchKernelEx, (const CUlaunchConfig *, CUfunction, void **, void **))  \
    X(cuStreamCreate, cuStreamCreate, (CUstream *, unsigned))                                      \
    X(cuStreamSynchronize, cuStreamSynchronize, (CUstream))                                        \
    X(cuStreamDestroy, cuStreamDestroy_v2, (CUstream))                                             \
    X(cuCtxSynchronize_v2, cuCtxSynchronize_v2, (CUcontext)) /* CUDA 13, by its own name */        \
    X(cuStreamBeginCapture, cuStreamBeginCapture_v2, (CUstream, unsigned))                         \
    X(cuStreamEndCapture, cuStreamEndCapture, (CUstream, CUgraph *))                               \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags,                                    \
      (CUgraphExec *, CUgraph, unsigned long long))                                                \
    X(cuGraphLaunch, cuGraphLaunch, (CUgraphExec, CUstream))                                       \
    X(cuGraphGetNodes, cuGraphGetNodes, (CUgraph, CUgraphNode *, size_t *))                      \
    X(cuMemsetD32, cuMemsetD32_v2, (CUdeviceptr, unsigned, size_t))                               \
    X(cuMemcpyDtoD, cuMemcpyDtoD_v2, (CUdeviceptr, CUdeviceptr, size_t))                          \
    X(cuCtxCreate, cuCtxCreate_v4, (CUcontext *, void *, unsigned, int))                          \
    X(cuCtxDestroy, cuCtxDestroy_v2, (CUcontext))                                                 \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, (int))                                \
    X(cuStreamWriteValue32, cuStreamWriteValue32_v2, (CUstream, CUdeviceptr, unsigned, unsigned)) \
    X(cuMemFree, cuMemFree_v2, (CUdeviceptr))                                                     \
    X(cuLaunchHostFunc, cuLaunchHostFunc, (CUstream, void (*)(void *), void *))                 \
    X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, (CUdeviceptr, const void *, size_t, CUstream))

#define DECLARE(name, sym, params) static CUresult(*p_##name) params;
DRIVER_FUNCTIONS(DECLARE)

#ifdef LINKED
#define PROTO(name, sym, params) extern CUresult sym params;
DRIVER_FUNCTIONS(PROTO)
#endif

static const char *MODULE =
    "// fake: slow delay_us=20000\n"
    "// fake: quick\n"
    "// fake: oob_write fault=700 delay_us=1000\n"
    "// fake: instant_oob fault=700\n"
    "// fake: hold delay_us=4000000\n"
    "// fake: late_oob fault=700 delay_us=50000\n"
    "// fake: later_oob fault=700 delay_us=1000000\n"
    "// fake: brief delay_us=3000\n"
    "// fake: twin_a fault=700 fault_on=151\n"
    "// fake: twin_b fault=700 fault_on=152\n"
    ".visible .entry slow(\n.visible .entry quick(\n.visible .entry oob_write(\n"
    ".visible .entry instant_oob(\n.visible .entry hold(\n.visible .entry late_oob(\n"
    ".visible .entry twin_a(\n.visible .entry twin_b(\n.visible .entry brief(\n.visible .entry later_oob(\n";

/* late_oob: faults 50 ms after it starts, for scenarios whose host calls must come before the
 * fault however slow the machine is (oob_write's 1 ms was outrun on a loaded 2-core machine). */
/* later_oob: faults 1 s after it starts, for "exited_threads", whose 100 threads after the culprit
 * outran late_oob's 50 ms on a loaded 2-core machine (their launches then returned the 700). */
/* twin_a, twin_b: kernels launched from two call paths in turn; the 151st execution of twin_a
 * faults (a launch from path a), the 152nd of twin_b (from path b). */
static CUfunction slow, quick, oob_write, instant_oob, hold, late_oob, later_oob, twin_a, twin_b, brief;
static CUcontext ctx;
static unsigned bad_block = 256; /* launch_bad_kernel's block size (2048: an invalid launch) */
static CUdeviceptr buffer;

static void check(const char *what, CUresult rc) {
    if (rc != 0) {
        printf("setup_failed=%s rc=%u\n", what, rc);
        exit(3);
    }
}

static long tid(void) { return syscall(SYS_gettid); }

static void resolve(int per_thread, int by_dlsym) {
#ifdef LINKED
    (void)per_thread;
    (void)by_dlsym;
#define ASSIGN(name, sym, params) p_##name = sym;
    DRIVER_FUNCTIONS(ASSIGN)
#else
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        printf("setup_failed=dlopen %s\n", dlerror());
        exit(3);
    }
    if (by_dlsym) {
#define BY_DLSYM(name, sym, params) *(void **)&p_##name = dlsym(h, #sym);
        DRIVER_FUNCTIONS(BY_DLSYM)
    } else {
        CUresult (*gpa)(const char *, void **, int, unsigned long long, int *) =
            (CUresult(*)(const char *, void **, int, unsigned long long, int *))dlsym(h, "cuGetProcAddress_v2");
        if (!gpa) {
            printf("setup_failed=cuGetProcAddress_v2\n");
            exit(3);
        }
        int status;
#define BY_GPA(name, sym, params) check(#name, gpa(#name, (void **)&p_##name, 13000, per_thread ? 2 : 0, &status));
        DRIVER_FUNCTIONS(BY_GPA)
    }
#endif
}

static void setup(void) {
    int dev;
    CUmodule mod;
    check("cuInit", p_cuInit(0));
    check("cuDeviceGet", p_cuDeviceGet(&dev, 0));
    check("cuDevicePrimaryCtxRetain", p_cuDevicePrimaryCtxRetain(&ctx, dev));
    check("cuCtxSetCurrent", p_cuCtxSetCurrent(ctx));
    check("cuModuleLoadData", p_cuModuleLoadData(&mod, MODULE));
    check("slow", p_cuModuleGetFunction(&slow, mod, "slow"));
    check("quick", p_cuModuleGetFunction(&quick, mod, "quick"));
    check("oob_write", p_cuModuleGetFunction(&oob_write, mod, "oob_write"));
    check("instant_oob", p_cuModuleGetFunction(&instant_oob, mod, "instant_oob"));
    check("twin_a", p_cuModuleGetFunction(&twin_a, mod, "twin_a"));
    check("twin_b", p_cuModuleGetFunction(&twin_b, mod, "twin_b"));
    check("brief", p_cuModuleGetFunction(&brief, mod, "brief"));
    check("later_oob", p_cuModuleGetFunction(&later_oob, mod, "later_oob"));
    check("hold", p_cuModuleGetFunction(&hold, mod, "hold"));
    check("late_oob", p_cuModuleGetFunction(&late_oob, mod, "late_oob"));
    check("cuMemAlloc", p_cuMemAlloc(&buffer, 4096));
    int host[16] = {0};
    check("cuMemcpyHtoD", p_cuMemcpyHtoD(buffer, host, sizeof host));
}

static CUresult launch(CUfunction f, unsigned grid, unsigned block, CUstream s) {
    void *params[] = {&buffer};
    return p_cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL);
}

__attribute__((noinline)) void launch_warmup(CUstream s, int n) {
    for (int i = 0; i < n; i++) check("warmup launch", launch(slow, 4, 128, s));
}

__attribute__((noinline)) CUresult launch_bad_kernel(CUfunction f, CUstream s) {
    return launch(f, 8, bad_block, s);
}

__attribute__((noinline)) void launch_after(CUstream s, int n) {
    for (int i = 0; i < n; i++) launch(quick, 1, 32, s);
}

/* Twin callers: the same frame size at the same depth, so their launches enter the hook with the
 * same registers and differ only in the return addresses on the stack (the memoized unwinds must
 * tell them apart). The empty asm after the call keeps each frame (no tail call). */
__attribute__((noinline)) CUresult launch_from_a(CUfunction f) {
    CUresult rc = launch_bad_kernel(f, NULL);
    __asm__ volatile("");
    return rc;
}

__attribute__((noinline)) CUresult launch_from_b(CUfunction f) {
    CUresult rc = launch_bad_kernel(f, NULL);
    __asm__ volatile("");
    return rc;
}

static int report_rc(const char *what, CUresult rc) {
    printf("%s=%u\n", what, rc);
    return rc == 0 ? 0 : 1;
}

__attribute__((noinline)) CUgraphExec capture_graph(CUstream s) {
    CUgraph g;
    CUgraphExec e;
    check("begin capture", p_cuStreamBeginCapture(s, 0));
    launch_warmup(s, 1);
    launch_bad_kernel(oob_write, s);
    launch_after(s, 1);
    check("end capture", p_cuStreamEndCapture(s, &g));
    check("instantiate", p_cuGraphInstantiateWithFlags(&e, g, 0));
    return e;
}

/* Loads the module into the current context and returns its `name` kernel. */
static CUfunction kernel_in_current(const char *name) {
    CUmodule m;
    CUfunction f;
    check("cuModuleLoadData", p_cuModuleLoadData(&m, MODULE));
    check(name, p_cuModuleGetFunction(&f, m, name));
    return f;
}

/* For "atexit": the global destructor / exit handler of a C++ program, running after glibc
 * destroyed the main thread's thread-local storage. */
static void at_exit_launch(void) {
    CUresult launched = launch_bad_kernel(oob_write, NULL);
    int out[16];
    CUresult rc = p_cuMemcpyDtoH(out, buffer, sizeof out);
    printf("atexit_launch_rc=%u\natexit_memcpy_rc=%u\n", launched, rc);
}

/* For "ptds_worker": a quick and a slow kernel on this thread's default stream. */
static void *ptds_worker_body(void *arg) {
    (void)arg;
    check("thread context", p_cuCtxSetCurrent(ctx));
    check("quick", launch(quick, 1, 32, NULL));
    check("slow", launch(slow, 1, 32, NULL));
    return NULL;
}

/* For "many_threads": 300 launches on the thread's per-thread default stream (with --ptds). */
static void *short_lived(void *arg) {
    (void)arg;
    check("thread context", p_cuCtxSetCurrent(ctx));
    for (int i = 0; i < 300; i++) check("launch", launch(quick, 1, 32, NULL));
    check("sync", p_cuStreamSynchronize(NULL));
    return NULL;
}

/* For "exited_threads": 10 quick kernels and a 3 ms one on the thread's per-thread default
 * stream, then the thread exits (with --ptds). */
static void *exiting_worker(void *arg) {
    (void)arg;
    check("thread context", p_cuCtxSetCurrent(ctx));
    for (int i = 0; i < 10; i++) check("quick", launch(quick, 1, 32, NULL));
    check("brief", launch(brief, 1, 32, NULL));
    return NULL;
}

/* For "exited_threads": a quick kernel, then the culprit (later_oob), on the thread's per-thread
 * default stream; the thread exits before the fault. */
static void *exiting_culprit(void *arg) {
    (void)arg;
    check("thread context", p_cuCtxSetCurrent(ctx));
    check("quick", launch(quick, 1, 32, NULL));
    launch_bad_kernel(later_oob, NULL);
    return NULL;
}

static void host_fn(void *arg) { (void)arg; }

/* For "fork_during_init" (built with -DLINKED: the first hooked call initialises cudablame). */
static void *first_hooked_call(void *arg) {
    (void)arg;
    CUdeviceptr d;
    for (int i = 0; i < 20; i++) (void)p_cuMemAlloc(&d, 16); /* no context: fails, hooked */
    return NULL;
}

/* Forks while another thread makes the process's first hooked calls; each child makes a hooked
 * call and exits. A child that has not exited after 5 s is killed and counted as hung. */
static int fork_during_init(void) {
    check("cuInit", p_cuInit(0));
    pthread_t t;
    pthread_create(&t, NULL, first_hooked_call, NULL);
    int hung = 0;
    pid_t kids[40];
    for (int i = 0; i < 40; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            CUdeviceptr d;
            (void)p_cuMemAlloc(&d, 16);
            _exit(0);
        }
    }
    for (int i = 0; i < 40; i++) {
        int status = 0, waited = 0;
        while (waitpid(kids[i], &status, WNOHANG) == 0) {
            if (++waited > 5000) {
                kill(kids[i], SIGKILL);
                waitpid(kids[i], &status, 0);
                hung++;
                break;
            }
            usleep(1000);
        }
    }
    pthread_join(t, NULL);
    printf("hung=%d\n", hung);
    return 0;
}

static void *thread_body(void *arg) {
    (void)arg;
    printf("launch_tid=%ld\n", tid());
    check("thread context", p_cuCtxSetCurrent(ctx));
    launch_bad_kernel(oob_write, NULL);
    return NULL;
}

int main(int argc, char **argv) {
    int per_thread = 0, by_dlsym = 0;
    const char *scenario = "oob";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ptds")) per_thread = 1;
        else if (!strcmp(argv[i], "--dlsym")) by_dlsym = 1;
        else if (!strcmp(argv[i], "dlclose_refresh") || !strcmp(argv[i], "unloaded_plugin")) {
            scenario = argv[i];
            break;
        } else scenario = argv[i];
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    /* A program that moves into another folder after it started (a training script into its run
     * folder): relative report paths stay relative to the start (tests/bad_input.rs). */
    /* A folder renamed while the program runs (its start folder, or a parent of it):
     * SCENARIO_RENAME=FROM:TO, before SCENARIO_CHDIR (tests/bad_input.rs). */
    const char *rename_ = getenv("SCENARIO_RENAME");
    if (rename_ && strchr(rename_, ':')) {
        char from[4096];
        snprintf(from, sizeof from, "%.*s", (int)(strchr(rename_, ':') - rename_), rename_);
        if (rename(from, strchr(rename_, ':') + 1) != 0) {
            perror("rename");
            return 3;
        }
    }
    const char *move_to = getenv("SCENARIO_CHDIR");
    if (move_to && chdir(move_to) != 0) {
        perror("chdir");
        return 3;
    }
    printf("pid=%d\nmain_tid=%ld\n", getpid(), tid());
    resolve(per_thread, by_dlsym);
    if (!strcmp(scenario, "fork_during_init")) return fork_during_init();
    setup();
    int out[16];

    if (!strcmp(scenario, "oob")) {
        /* #1 the upload in setup(), #2 #3 slow, #4 oob_write (culprit), #5..#7 quick; the
         * read-back reports it. */
        launch_warmup(NULL, 2);
        launch_bad_kernel(oob_write, NULL);
        launch_after(NULL, 3);
        int rc = report_rc("memcpy_rc", p_cuMemcpyDtoH(out, buffer, sizeof out));
        report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL)); /* a second sticky return: counted, not reported */
        return rc;
    }
    if (!strcmp(scenario, "destroyed_stream")) {
        /* A stream created and destroyed without ever being launched on (as cuBLASLt does):
         * nothing may ask the driver about the dangling handle. #1 upload, #2 oob_write. */
        CUstream s;
        check("stream", p_cuStreamCreate(&s, 1));
        check("destroy", p_cuStreamDestroy(s));
        launch_bad_kernel(oob_write, NULL);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "destroyed_streams_synced") ||
        !strcmp(scenario, "destroyed_streams_unsynced")) {
        /* 80 non-blocking streams, each destroyed right after 25 slow kernels (0.5 s) were
         * launched on it (more than cudablame keeps on its list of destroyed streams with
         * possibly unfinished work); in _synced a successful context synchronization then proves
         * all their work complete. #1 upload, #2 oob_write (culprit) on the legacy stream. */
        for (int i = 0; i < 80; i++) {
            CUstream s;
            check("stream", p_cuStreamCreate(&s, 1));
            for (int k = 0; k < 25; k++) check("slow launch", launch(slow, 1, 32, s));
            check("destroy", p_cuStreamDestroy(s));
        }
        if (!strcmp(scenario, "destroyed_streams_synced")) check("sync", p_cuCtxSynchronize_v2(NULL));
        launch_bad_kernel(oob_write, NULL);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "destroyed_streams_done")) {
        /* 80 non-blocking streams, each destroyed right after 10 quick kernels were launched on
         * it; 50 ms later (no synchronization) their work has long completed. #1 upload, #2
         * oob_write (culprit) on the legacy stream. */
        for (int i = 0; i < 80; i++) {
            CUstream s;
            check("stream", p_cuStreamCreate(&s, 1));
            for (int k = 0; k < 10; k++) check("quick launch", launch(quick, 1, 32, s));
            check("destroy", p_cuStreamDestroy(s));
        }
        usleep(50000);
        launch_bad_kernel(oob_write, NULL);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "run_ahead")) {
        /* Long run-ahead: #1 upload, #2 hold (4 s), #3 oob_write (culprit), then 100,000 quick
         * launches are enqueued behind it before it even starts: far more than the ring keeps.
         * The context sync reports it. */
        check("hold launch", launch(hold, 1, 32, NULL));
        launch_bad_kernel(oob_write, NULL);
        int ok = 0;
        for (int i = 0; i < 100000; i++) ok += launch(quick, 1, 32, NULL) == 0;
        printf("launched_after=%d\n", ok);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "same_depth")) {
        /* #1 upload, #2..#201 quick from a and b in turn, #202 quick from a, #203 instant_oob
         * from b (culprit): its launch stack must show b, never the memoized stack of a. */
        for (int i = 0; i < 100; i++) {
            check("a", launch_from_a(quick));
            check("b", launch_from_b(quick));
        }
        check("a", launch_from_a(quick));
        launch_from_b(instant_oob);
        usleep(50000);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "twin_sites_a") || !strcmp(scenario, "twin_sites_b")) {
        /* #1 upload, then one kernel launched from paths a and b in turn, from one place each
         * in this loop, until a launch fails: twin_a's 151st execution (#152, from a) or
         * twin_b's 152nd (#153, from b) faults. The culprit's stack must be its own path's,
         * among 150 launches of the same kernel from the twin path (whatever reuses stacks
         * between launches, as the unmerged launch-site experiment did, must tell them apart). */
        CUfunction twin = !strcmp(scenario, "twin_sites_a") ? twin_a : twin_b;
        for (int i = 0; i < 100; i++) {
            if (launch_from_a(twin) != 0 || launch_from_b(twin) != 0) break;
        }
        usleep(50000);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "next_launch")) {
        /* #1 upload, #2 instant_oob (culprit); the fault lands before the next launch, which
         * reports it. */
        launch_bad_kernel(instant_oob, NULL);
        usleep(50000);
        return report_rc("launch_rc", launch(quick, 1, 32, NULL));
    }
    if (!strcmp(scenario, "side_stream")) {
        /* A: #1..#3 slow, synchronized. B: #1 instant_oob (culprit). Reported by A's sync. */
        CUstream a, b;
        check("stream a", p_cuStreamCreate(&a, 1));
        check("stream b", p_cuStreamCreate(&b, 1));
        printf("stream_b=%p\n", b);
        launch_warmup(a, 3);
        check("sync a", p_cuStreamSynchronize(a));
        launch_bad_kernel(instant_oob, b);
        usleep(50000);
        return report_rc("sync_rc", p_cuStreamSynchronize(a));
    }
    if (!strcmp(scenario, "drained_at_wait")) {
        /* A: #1..#6 quick, launched back to back (the default marker budget marks #1 only).
         * B: #1 late_oob (culprit), faults after 50 ms, when A has long drained. The context sync
         * right after the launches reports it: only B has unfinished work if A's drain is
         * proven (a marker behind A's newest op, enqueued as the host starts waiting). */
        CUstream a, b;
        check("stream a", p_cuStreamCreate(&a, 1));
        check("stream b", p_cuStreamCreate(&b, 1));
        printf("stream_b=%p\n", b);
        for (int i = 0; i < 6; i++) check("quick", launch(quick, 1, 32, a));
        launch_bad_kernel(late_oob, b);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "busy_stream")) {
        /* A: many slow kernels still queued (the first runs for 20 ms). B: instant_oob launched
         * last. Both streams have unfinished work: `likely`, most recent first = B's #1. */
        CUstream a, b;
        check("stream a", p_cuStreamCreate(&a, 1));
        check("stream b", p_cuStreamCreate(&b, 1));
        launch_warmup(a, 5);
        usleep(2000);
        launch_bad_kernel(instant_oob, b);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "exited_threads")) {
        /* With --ptds. 100 threads one after another (exiting_worker), then one that launches
         * later_oob (faults 1 s after it starts; exiting_culprit), then 100 more workers, then
         * cuCtxSynchronize. Each exited thread's per-thread stream is retired with an unmarked
         * tail nothing proves done (a marker for it could only come from its own thread): 64
         * are kept, the rest only counted, and the culprit's stream can be among those no
         * longer kept. Then the report must not present its window as all that can have
         * faulted. */
        for (int i = 0; i < 201; i++) {
            pthread_t t;
            pthread_create(&t, NULL, i == 100 ? exiting_culprit : exiting_worker, NULL);
            pthread_join(t, NULL);
        }
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "ptds_worker")) {
        /* With --ptds. A worker thread: #1 quick, #2 slow (20 ms) on its per-thread default
         * stream, then it exits. Main: late_oob (culprit, faults after 50 ms) on a created
         * stream, then cuCtxSynchronize. Nothing proves the worker's #2 done: likely. A marker for it can only be enqueued from the worker itself (the per-thread
         * handle means the calling thread's stream). */
        pthread_t t;
        CUstream b;
        check("stream b", p_cuStreamCreate(&b, 1));
        pthread_create(&t, NULL, ptds_worker_body, NULL);
        pthread_join(t, NULL);
        launch_bad_kernel(late_oob, b);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "threads")) {
        /* Another thread launches the culprit (#3 after the upload and one warmup); main thread syncs. */
        pthread_t t;
        launch_warmup(NULL, 1);
        pthread_create(&t, NULL, thread_body, NULL);
        pthread_join(t, NULL);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "launch_ex")) {
        /* cuLaunchKernelEx on a created stream: #1 oob_write with grid 3x2x1, block 64x2x1, 128 B smem. */
        CUstream s;
        check("stream", p_cuStreamCreate(&s, 1));
        CUlaunchConfig cfg = {3, 2, 1, 64, 2, 1, 128, s, NULL, 0};
        void *params[] = {&buffer};
        check("launch ex", p_cuLaunchKernelEx(&cfg, oob_write, params, NULL));
        return report_rc("sync_rc", p_cuStreamSynchronize(s));
    }
    if (!strcmp(scenario, "launch_error")) {
        /* 2048 threads per block: the launch itself fails with CUDA_ERROR_INVALID_VALUE (1). */
        launch_warmup(NULL, 1);
        bad_block = 2048;
        CUresult rc = launch_bad_kernel(quick, NULL);
        printf("launch_rc=%u\n", rc);
        (void)launch(quick, 1, 2048, NULL); /* a second bad launch: counted only */
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL)) || rc != 0;
    }
    if (!strcmp(scenario, "capture")) {
        /* Global-mode capture of 3 kernels on S must stay valid and hold exactly 3 nodes (no
         * markers inside the user's graph); then S: #1 the graph launch, #2 oob (culprit). */
        CUstream s;
        CUgraph g;
        CUgraphExec e;
        size_t nodes = 0;
        check("stream", p_cuStreamCreate(&s, 1));
        check("begin capture", p_cuStreamBeginCapture(s, 0));
        launch_warmup(s, 3);
        printf("end_capture_rc=%u\n", p_cuStreamEndCapture(s, &g));
        check("nodes", p_cuGraphGetNodes(g, NULL, &nodes));
        printf("graph_nodes=%zu\n", nodes);
        check("instantiate", p_cuGraphInstantiateWithFlags(&e, g, 0));
        check("graph launch", p_cuGraphLaunch(e, s));
        launch_bad_kernel(oob_write, s);
        return report_rc("sync_rc", p_cuStreamSynchronize(s));
    }
    if (!strcmp(scenario, "graph_fault")) {
        /* A graph captured from capture_graph(): slow, oob_write (faults), quick. S: #1 the graph
         * launch (culprit: the graph, naming its kernels and their capture-time stacks). */
        CUstream s;
        CUgraphExec e;
        check("stream", p_cuStreamCreate(&s, 1));
        e = capture_graph(s);
        check("graph launch", p_cuGraphLaunch(e, s));
        return report_rc("sync_rc", p_cuStreamSynchronize(s));
    }
    if (!strcmp(scenario, "memset_between")) {
        /* #1 upload, #2 late_oob (culprit, runs 50 ms), #3 a memset of device memory that
         * returns before the kernel ends (it proves nothing), #4 a device-to-device copy (the
         * same), #5 quick; the read-back reports it. */
        launch_bad_kernel(late_oob, NULL);
        printf("memset_rc=%u\n", p_cuMemsetD32(buffer, 7, 16));
        printf("dtod_rc=%u\n", p_cuMemcpyDtoD(buffer + 1024, buffer, 64));
        launch_after(NULL, 1);
        return report_rc("memcpy_rc", p_cuMemcpyDtoH(out, buffer, sizeof out));
    }
    if (!strcmp(scenario, "write_value")) {
        /* #1 upload, #2 slow (20 ms), #3 the program's own cuStreamWriteValue32 into memory it
         * frees right after (the culprit: a stream memory operation that faults when it runs),
         * #4 quick; the read-back reports it. */
        CUdeviceptr tmp;
        check("cuMemAlloc", p_cuMemAlloc(&tmp, 256));
        launch_warmup(NULL, 1);
        printf("write_rc=%u\n", p_cuStreamWriteValue32(NULL, tmp, 1, 0));
        check("cuMemFree", p_cuMemFree(tmp));
        launch_after(NULL, 1);
        return report_rc("memcpy_rc", p_cuMemcpyDtoH(out, buffer, sizeof out));
    }
    if (!strcmp(scenario, "host_func")) {
        /* #1 upload, #2 quick, then a host function (work cudablame does not record as an op),
         * #3 oob_write (culprit), #4 quick. The marker proves #2; the host function ran in
         * between: the verdict names #3 but cannot be exact. */
        launch_after(NULL, 1);
        printf("host_func_rc=%u\n", p_cuLaunchHostFunc(NULL, host_fn, NULL));
        launch_bad_kernel(oob_write, NULL);
        launch_after(NULL, 1);
        return report_rc("memcpy_rc", p_cuMemcpyDtoH(out, buffer, sizeof out));
    }
    if (!strcmp(scenario, "dlclose_refresh")) {
        /* argv: ... dlclose_refresh LIB_A LIB_B. A launch from main (cudablame's unwinder lists
         * the loaded modules), then B is loaded, A loaded and unloaded, and at once (well within
         * the unwinder's 100 ms rescan period) oob_write is launched from B: its launch stack
         * must go through B to main. */
        launch_after(NULL, 1);
        void *b = dlopen(argv[argc - 1], RTLD_NOW);
        void *a = dlopen(argv[argc - 2], RTLD_NOW);
        if (!a || !b) {
            printf("setup_failed=dlopen %s\n", dlerror());
            return 3;
        }
        printf("dlclose_rc=%d\n", dlclose(a));
        CUresult (*from_b)(void *, void *, void **) =
            (CUresult(*)(void *, void *, void **))dlsym(b, "launch_from_plugin");
        void *params[] = {&buffer};
        check("launch from b", from_b((void *)p_cuLaunchKernel, oob_write, params));
        return report_rc("memcpy_rc", p_cuMemcpyDtoH(out, buffer, sizeof out));
    }
    if (!strcmp(scenario, "unloaded_plugin")) {
        /* argv: ... unloaded_plugin LIB_A LIB_B (issue 19 item 6). oob_write is launched from
         * plugin A, A is unloaded and B (another library of the same size) loaded, normally at
         * A's address; then the error is reported. The culprit's launch stack is unwound now:
         * its frame in A must read "unloaded module", never B's function. */
        void *a = dlopen(argv[argc - 2], RTLD_NOW);
        if (!a) {
            printf("setup_failed=dlopen %s\n", dlerror());
            return 3;
        }
        CUresult (*from_a)(void *, void *, void **) =
            (CUresult(*)(void *, void *, void **))dlsym(a, "launch_from_plugin");
        void *params[] = {&buffer};
        check("launch from a", from_a((void *)p_cuLaunchKernel, oob_write, params));
        Dl_info ia, ib;
        dladdr((void *)from_a, &ia);
        void *base_a = ia.dli_fbase;
        printf("dlclose_rc=%d\n", dlclose(a));
        void *b = dlopen(argv[argc - 1], RTLD_NOW);
        void *b_fn = b ? dlsym(b, "plugin_b_free_buffers") : NULL;
        if (!b_fn || !dladdr(b_fn, &ib)) {
            printf("setup_failed=dlopen b %s\n", dlerror());
            return 3;
        }
        printf("same_address=%d\n", ib.dli_fbase == base_a);
        return report_rc("memcpy_rc", p_cuMemcpyDtoH(out, buffer, sizeof out));
    }
    if (!strcmp(scenario, "two_contexts")) {
        /* Context A (the primary context of device 0): stream S, #1 oob_write (culprit). Context
         * B (created on device 1, current from then on): slow, still running. The program
         * synchronizes S: the error is A's, the verdict must look at A's streams. */
        CUstream s;
        CUcontext b;
        int dev1;
        check("stream", p_cuStreamCreate(&s, 1));
        launch_bad_kernel(oob_write, s);
        check("cuDeviceGet 1", p_cuDeviceGet(&dev1, 1));
        check("cuCtxCreate", p_cuCtxCreate(&b, NULL, 0, dev1));
        CUfunction slow_b = kernel_in_current("slow");
        check("slow on b", launch(slow_b, 1, 32, NULL));
        return report_rc("sync_rc", p_cuStreamSynchronize(s));
    }
    if (!strcmp(scenario, "legacy_switch") || !strcmp(scenario, "legacy_switch_back")) {
        /* One thread, two contexts' legacy streams: context A (device 0's primary) #2, #3
         * quick; context B (created on device 1, current from then on) #1 quick, #2 oob_write
         * (legacy_switch: the culprit; else quick), #3 quick; A made current again, its #4 (#1 is
         * the setup's blocking copy; legacy_switch_back: oob_write, the culprit; else quick); then the culprit's context's
         * cuCtxSynchronize reports. cudablame's hot path trusts the thread's cached stream and
         * checks the current context only after each launch: each op must still be recorded
         * in its own context's legacy stream. */
        int back = !strcmp(scenario, "legacy_switch_back");
        CUcontext a = ctx, b;
        int dev1;
        launch_after(NULL, 2);
        check("cuDeviceGet 1", p_cuDeviceGet(&dev1, 1));
        check("cuCtxCreate", p_cuCtxCreate(&b, NULL, 0, dev1));
        CUfunction quick_b = kernel_in_current("quick");
        CUfunction bad_b = kernel_in_current("oob_write");
        check("quick b", launch(quick_b, 1, 32, NULL));
        launch_bad_kernel(back ? quick_b : bad_b, NULL);
        launch(quick_b, 1, 32, NULL);
        check("set a", p_cuCtxSetCurrent(a));
        if (back) {
            launch_bad_kernel(oob_write, NULL);
        } else {
            launch_after(NULL, 1);
            check("set b", p_cuCtxSetCurrent(b));
        }
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "marker_other_context")) {
        /* Issue 19 item 7. Context B (device 1) gets a stream whose first op is a copy issued
         * while context A (device 0's primary) is current: cudablame makes B's marker slab then.
         * The stream is synchronized (clean_sync_rc must be 0: a marker B's device cannot
         * write would be a new fault), then B's stream runs #2 quick, #3 oob_write (culprit),
         * #4 quick. */
        CUcontext a = ctx, b;
        CUstream sb;
        CUdeviceptr buf_b;
        int dev1;
        static int host[16];
        check("cuDeviceGet 1", p_cuDeviceGet(&dev1, 1));
        check("cuCtxCreate", p_cuCtxCreate(&b, NULL, 0, dev1));
        CUfunction quick_b = kernel_in_current("quick");
        CUfunction bad_b = kernel_in_current("oob_write");
        check("stream", p_cuStreamCreate(&sb, 1));
        check("cuMemAlloc b", p_cuMemAlloc(&buf_b, 4096));
        check("set a", p_cuCtxSetCurrent(a));
        check("copy", p_cuMemcpyHtoDAsync(buf_b, host, sizeof host, sb));
        printf("clean_sync_rc=%u\n", p_cuStreamSynchronize(sb));
        check("set b", p_cuCtxSetCurrent(b));
        check("quick", launch(quick_b, 1, 32, sb));
        launch_bad_kernel(bad_b, sb);
        launch(quick_b, 1, 32, sb);
        return report_rc("sync_rc", p_cuStreamSynchronize(sb));
    }
    if (!strcmp(scenario, "ctx_destroy") || !strcmp(scenario, "primary_reset")) {
        /* A context that got progress markers is destroyed (ctx_destroy: a created context;
         * primary_reset: the primary context, as cudaDeviceReset does): the driver frees what was
         * allocated in it. Then new work faults in a live context: the report must not read the
         * old markers nor blame the old context's ops. */
        int reset = !strcmp(scenario, "primary_reset");
        if (reset) {
            launch_after(NULL, 2);
            check("sync", p_cuCtxSynchronize_v2(NULL));
            check("reset", p_cuDevicePrimaryCtxReset(0));
            check("retain", p_cuDevicePrimaryCtxRetain(&ctx, 0));
            check("set", p_cuCtxSetCurrent(ctx));
        } else {
            CUcontext c;
            check("cuCtxCreate", p_cuCtxCreate(&c, NULL, 0, 0));
            CUfunction q = kernel_in_current("quick");
            CUstream s;
            check("stream", p_cuStreamCreate(&s, 1));
            for (int i = 0; i < 3; i++) check("launch", launch(q, 1, 32, s));
            check("launch", launch(q, 1, 32, NULL));
            check("sync", p_cuCtxSynchronize_v2(NULL));
            check("destroy", p_cuCtxDestroy(c));
            check("set", p_cuCtxSetCurrent(ctx));
        }
        CUfunction bad = reset ? kernel_in_current("oob_write") : oob_write;
        if (reset) {
            check("cuMemAlloc", p_cuMemAlloc(&buffer, 4096));
        }
        launch_bad_kernel(bad, NULL);
        launch_after(NULL, 1);
        return report_rc("memcpy_rc", p_cuMemcpyDtoH(out, buffer, sizeof out));
    }
    if (!strcmp(scenario, "atexit")) {
        /* main launches (cudablame's thread-local caches are in use), then returns; the exit
         * handler launches oob_write and reads back after glibc destroyed thread-local storage. */
        launch_after(NULL, 2);
        check("sync", p_cuCtxSynchronize_v2(NULL));
        atexit(at_exit_launch);
        return 0;
    }
    if (!strcmp(scenario, "many_threads")) {
        /* 800 short-lived threads (4 at a time) x 300 launches each; prints the peak RSS. */
        int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 200;
        for (int round = 0; round < rounds; round++) {
            pthread_t t[4];
            for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, short_lived, NULL);
            for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("maxrss_kb=%ld\n", ru.ru_maxrss);
        return report_rc("sync_rc", p_cuCtxSynchronize_v2(NULL));
    }
    if (!strcmp(scenario, "ok")) {
        /* No error at all: no report, same output with and without the shim. */
        launch_warmup(NULL, 2);
        launch_after(NULL, 2);
        int rc = report_rc("memcpy_rc", p_cuMemcpyDtoH(out, buffer, sizeof out));
        printf("first_word=%d\n", out[0]);
        return rc;
    }
    if (!strcmp(scenario, "secondary")) {
        /* A rank hit by another rank's fault: ~200 ms after start (so later than the fault of a
         * rank running `oob`), #2 instant_oob faults and the next launch reports it. */
        usleep(200000);
        launch_bad_kernel(instant_oob, NULL);
        usleep(50000);
        return report_rc("launch_rc", launch(quick, 1, 32, NULL));
    }
    printf("unknown scenario %s\n", scenario);
    return 4;
}
