/* Process-life and robustness scenarios for the shim's reliability tests, run against the fake
 * driver. The driver is reached like the static CUDA runtime does it (dlopen("libcuda.so.1",
 * RTLD_LOCAL) + dlsym), so libcuda is not in the global scope.
 *
 * Usage: life SCENARIO [ARG]
 *   fork            parent faults (its report), forks; the child faults in a context of its own
 *   fork_exit       three good kernels and a sync, then forks; the child makes no CUDA call and
 *                   leaves with exit(0) (atexit handlers run), the parent after it
 *   exec            ok work, then exec of this program with "oob" (reports under the same pid)
 *   oob             one faulting kernel, reported by the read-back
 *   exit_nosync     kernels (one faulting) still queued when main returns: no report, no hang
 *   underscore_exit the same, leaving with _exit(7)
 *   exit_launching  exit(0) while another thread launches in a loop
 *   dlclose         work, dlclose of the driver, dlopen again, a fault reported
 *   plugin_local    ARG: a library loaded RTLD_LOCAL that reaches the driver through its own
 *                   dependencies (cudaGetDriverEntryPoint of a runtime, RTLD_DEFAULT lookups)
 *   plugin_deepbind ARG: the same library loaded with RTLD_DEEPBIND; the program synchronizes
 *   abort_after     the failing read-back returns, then abort()
 *   two_threads     two threads hit the sticky error at the same moment
 *   capture_other   thread A captures in global mode while thread B launches on a new stream
 * Prints key=value lines; exit status 0 on the expected path (1 when a CUDA error came back where
 * a real program would fail, 2 usage, 3 setup failure). */
#define _GNU_SOURCE
#define CUDA_MIN_NO_API_MACROS
#include "cuda_min.h"
#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define DRIVER(X)                                                                                 \
    X(cuInit, (unsigned))                                                                         \
    X(cuDeviceGet, (CUdevice *, int))                                                             \
    X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice))                                          \
    X(cuCtxCreate_v2, (CUcontext *, unsigned, CUdevice))                                          \
    X(cuCtxSetCurrent, (CUcontext))                                                               \
    X(cuModuleLoadData, (CUmodule *, const void *))                                               \
    X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *))                                \
    X(cuMemAlloc_v2, (CUdeviceptr *, size_t))                                                     \
    X(cuMemcpyDtoH_v2, (void *, CUdeviceptr, size_t))                                             \
    X(cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,     \
                       unsigned, CUstream, void **, void **))                                    \
    X(cuStreamCreate, (CUstream *, unsigned))                                                     \
    X(cuStreamSynchronize, (CUstream))                                                            \
    X(cuCtxSynchronize, (void))                                                                   \
    X(cuStreamBeginCapture_v2, (CUstream, CUstreamCaptureMode))                                   \
    X(cuStreamEndCapture, (CUstream, CUgraph *))                                                  \
    X(cuGraphGetNodes, (CUgraph, CUgraphNode *, size_t *))

#define DECLARE(name, params) static CUresult(*p_##name) params;
DRIVER(DECLARE)

static void *lib;
static CUcontext ctx;
static CUfunction quick, slow, oob, instant_oob;
static CUdeviceptr buffer;

static const char *MODULE =
    "// fake: quick\n"
    "// fake: slow delay_us=50000\n"
    "// fake: oob fault=700 delay_us=1000\n"
    "// fake: instant_oob fault=700\n";

static long tid(void) { return syscall(SYS_gettid); }

static void resolve(void) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("setup_failed=dlopen %s\n", dlerror());
        exit(3);
    }
#define RESOLVE(name, params)                                                                     \
    *(void **)&p_##name = dlsym(lib, #name);                                                      \
    if (!p_##name) {                                                                              \
        printf("setup_failed=dlsym %s\n", #name);                                                 \
        exit(3);                                                                                  \
    }
    DRIVER(RESOLVE)
}

/* Loads the module into the current context and gets the kernels. */
static void load_module(void) {
    CUmodule mod;
    check("cuModuleLoadData", p_cuModuleLoadData(&mod, MODULE));
    check("quick", p_cuModuleGetFunction(&quick, mod, "quick"));
    check("slow", p_cuModuleGetFunction(&slow, mod, "slow"));
    check("oob", p_cuModuleGetFunction(&oob, mod, "oob"));
    check("instant_oob", p_cuModuleGetFunction(&instant_oob, mod, "instant_oob"));
    check("cuMemAlloc", p_cuMemAlloc_v2(&buffer, 4096));
}

static void setup(void) {
    CUdevice dev;
    resolve();
    check("cuInit", p_cuInit(0));
    check("cuDeviceGet", p_cuDeviceGet(&dev, 0));
    check("retain", p_cuDevicePrimaryCtxRetain(&ctx, dev));
    check("set", p_cuCtxSetCurrent(ctx));
    load_module();
}

static CUresult launch(CUfunction f, CUstream s) {
    void *params[] = {&buffer};
    return p_cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
}

__attribute__((noinline)) CUresult launch_bad_kernel(CUfunction f, CUstream s) { return launch(f, s); }

static int read_back(const char *key) {
    int out[16];
    CUresult rc = p_cuMemcpyDtoH_v2(out, buffer, sizeof out);
    printf("%s=%u\n", key, rc);
    return rc == 0 ? 0 : 1;
}

/* ---- scenarios ---------------------------------------------------------------------------- */

static int scenario_fork(void) {
    launch(quick, NULL);
    launch_bad_kernel(oob, NULL);
    read_back("parent_rc");
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        /* The child never touches the parent's (poisoned) context: a context of its own. */
        CUcontext mine;
        printf("child_pid=%d\nchild_tid=%ld\n", getpid(), tid());
        check("child context", p_cuCtxCreate_v2(&mine, 0, 1));
        load_module();
        launch(quick, NULL);
        launch_bad_kernel(instant_oob, NULL);
        CUresult rc = p_cuCtxSynchronize();
        printf("child_rc=%u\n", rc);
        fflush(stdout);
        _exit(rc == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}

static int scenario_fork_exit(void) {
    for (int i = 0; i < 3; i++) launch(quick, NULL);
    check("sync", p_cuCtxSynchronize());
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("child_pid=%d\n", getpid());
        exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}

static int scenario_exec(const char *self) {
    for (int i = 0; i < 3; i++) launch(quick, NULL);
    check("sync", p_cuCtxSynchronize());
    fflush(stdout);
    execl(self, self, "oob", (char *)NULL);
    printf("exec_failed\n");
    return 3;
}

static int scenario_oob(void) {
    launch(quick, NULL);
    launch_bad_kernel(oob, NULL);
    launch(quick, NULL);
    return read_back("memcpy_rc");
}

static void queue_work_with_a_fault(void) {
    for (int i = 0; i < 5; i++) launch(slow, NULL);
    launch_bad_kernel(oob, NULL);
    for (int i = 0; i < 5; i++) launch(slow, NULL);
}

static volatile int stop;
static void *launch_forever(void *arg) {
    (void)arg;
    p_cuCtxSetCurrent(ctx);
    CUstream s;
    p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    for (long i = 0; !stop; i++) {
        launch(quick, s);
        if (i % 256 == 255) p_cuStreamSynchronize(s);
    }
    return NULL;
}

static int scenario_dlclose(void) {
    void *first = (void *)p_cuLaunchKernel;
    for (int i = 0; i < 3; i++) launch(quick, NULL);
    check("sync", p_cuCtxSynchronize());
    dlclose(lib);
    resolve();
    printf("reopened=1\n");
    (void)first;
    for (int i = 0; i < 3; i++) launch(quick, NULL);
    launch_bad_kernel(oob, NULL);
    return read_back("memcpy_rc");
}

static int scenario_plugin(const char *path, int deepbind) {
    void *plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL | (deepbind ? RTLD_DEEPBIND : 0));
    if (!plugin) {
        printf("setup_failed=plugin %s\n", dlerror());
        return 3;
    }
    int (*run)(void) = (int (*)(void))dlsym(plugin, "plugin_run");
    if (!run) {
        printf("setup_failed=plugin_run\n");
        return 3;
    }
    int rc = run();
    printf("plugin_rc=%d\n", rc);
    if (deepbind) {
        /* The program notices the error through its own (dlsym) path, in the context the
         * library made current on this thread. */
        resolve();
        CUresult sync = p_cuCtxSynchronize();
        printf("program_sync_rc=%u\n", sync);
    }
    return rc;
}

static int scenario_abort_after(void) {
    launch(quick, NULL);
    launch_bad_kernel(oob, NULL);
    read_back("memcpy_rc");
    fflush(stdout);
    abort();
}

static pthread_barrier_t together;
static CUresult thread_rc[2];
static void *sync_together(void *arg) {
    long i = (long)arg;
    p_cuCtxSetCurrent(ctx);
    pthread_barrier_wait(&together);
    thread_rc[i] = p_cuCtxSynchronize();
    return NULL;
}

static int scenario_two_threads(void) {
    pthread_t t[2];
    pthread_barrier_init(&together, NULL, 2);
    launch(quick, NULL);
    launch_bad_kernel(instant_oob, NULL);
    usleep(20000); /* the fault has happened: both threads find it at once */
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, sync_together, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("thread0_rc=%u\nthread1_rc=%u\n", thread_rc[0], thread_rc[1]);
    return thread_rc[0] == 700 && thread_rc[1] == 700 ? 0 : 1;
}

static CUstream capture_stream;
static pthread_barrier_t began, launched;
static CUresult b_rc = 12345;
static void *launch_on_new_stream(void *arg) {
    (void)arg;
    CUstream s;
    p_cuCtxSetCurrent(ctx);
    check("B stream", p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    pthread_barrier_wait(&began);
    /* The first launch of this context's streams: cudablame allocates its marker memory now. */
    b_rc = launch(quick, s);
    b_rc = b_rc ? b_rc : p_cuStreamSynchronize(s);
    pthread_barrier_wait(&launched);
    return NULL;
}

static int scenario_capture_other(void) {
    /* Setup made no launch: no stream of this context has marker memory yet. */
    pthread_t b;
    CUgraph g = NULL;
    size_t nodes = 0;
    pthread_barrier_init(&began, NULL, 2);
    pthread_barrier_init(&launched, NULL, 2);
    check("A stream", p_cuStreamCreate(&capture_stream, CU_STREAM_NON_BLOCKING));
    pthread_create(&b, NULL, launch_on_new_stream, NULL);
    check("begin capture", p_cuStreamBeginCapture_v2(capture_stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    pthread_barrier_wait(&began);
    pthread_barrier_wait(&launched);
    launch(quick, capture_stream);
    launch(quick, capture_stream);
    CUresult end = p_cuStreamEndCapture(capture_stream, &g);
    pthread_join(b, NULL);
    printf("b_launch_rc=%u\nend_capture_rc=%u\n", b_rc, end);
    if (end == CUDA_SUCCESS) check("nodes", p_cuGraphGetNodes(g, NULL, &nodes));
    printf("graph_nodes=%zu\n", nodes);
    return end == CUDA_SUCCESS && b_rc == CUDA_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: life SCENARIO [ARG]\n");
        return 2;
    }
    const char *scenario = argv[1];
    setvbuf(stdout, NULL, _IONBF, 0);
    printf("pid=%d\nmain_tid=%ld\n", getpid(), tid());
    if (!strcmp(scenario, "plugin_local")) return scenario_plugin(argv[2], 0);
    if (!strcmp(scenario, "plugin_deepbind")) return scenario_plugin(argv[2], 1);
    setup();
    if (!strcmp(scenario, "fork")) return scenario_fork();
    if (!strcmp(scenario, "fork_exit")) return scenario_fork_exit();
    if (!strcmp(scenario, "exec")) return scenario_exec(argv[0]);
    if (!strcmp(scenario, "oob")) return scenario_oob();
    if (!strcmp(scenario, "exit_nosync")) {
        queue_work_with_a_fault();
        return 0;
    }
    if (!strcmp(scenario, "underscore_exit")) {
        queue_work_with_a_fault();
        _exit(7);
    }
    if (!strcmp(scenario, "exit_launching")) {
        pthread_t t;
        pthread_create(&t, NULL, launch_forever, NULL);
        usleep(100000);
        printf("exiting\n");
        exit(0);
    }
    if (!strcmp(scenario, "dlclose")) return scenario_dlclose();
    if (!strcmp(scenario, "abort_after")) return scenario_abort_after();
    if (!strcmp(scenario, "two_threads")) return scenario_two_threads();
    if (!strcmp(scenario, "capture_other")) return scenario_capture_other();
    printf("unknown scenario %s\n", scenario);
    return 2;
}
