// graph_marker_probe.cu: can progress markers live inside a CUDA graph without changing what it
// does, and what does one replay cost with them? (Issue 15 item 4; an experiment, not a test.)
//
// Build and run (CUDA 13.0, H200):
//   nvcc -O2 -g -arch=sm_90 -o /tmp/graph_marker_probe cuda-samples/bench/graph_marker_probe.cu -lcuda
//   /tmp/graph_marker_probe inline     # R3 on the inline variant (the one that can be exact)
//   /tmp/graph_marker_probe side       # R3 on the side-branch variant
// (A fault kills the context: each run can test one variant's faulting replay.)
//
// The user's graph: a chain of N tiny kernels (bump), captured from a stream. The marked copy
// (what cudablame would instantiate instead, at cuGraphInstantiate): cuGraphClone of it, plus per
// kernel node one batch mem-op node (CU_STREAM_MEM_OP_WRITE_VALUE_64 of "node index + 1" into
// pinned, device-mapped host memory) that depends on that kernel only (a side branch: no user node
// waits for it), plus one memset node depending on every node that zeroes the slots at the end
// of a replay that completed (so a faulting replay leaves exactly its completed kernels' marks).
// A side-branch mark races with the next kernel: when that kernel faults, the previous kernel's
// mark may be killed before it is written. The "inline" variant puts each mark on the chain
// (kernel -> mark -> next kernel; captured with cuStreamWriteValue64 after each launch, then the
// reset memset), which cannot race but sits on the critical path. Both are timed.
//
// Lines printed:
//   R1 cost N=10|100|1000: replay us without / with markers (min and median of 7 interleaved
//      rounds of 50 replays), and the difference per kernel node
//   R2 results: the marked graph's buffer equals the plain graph's (same work done)
//   R3 fault: in a replay of the marked N=100 graph whose kernel #37 (0-based) stores to 0x10,
//      how many slots were set (expected 37: the kernels before it; the first unset slot in chain
//      order names the faulting node)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                 \
    do {                                                                            \
        cudaError_t e_ = (call);                                                    \
        if (e_ != cudaSuccess) {                                                    \
            printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__,  \
                   __LINE__, #call);                                                \
            exit(2);                                                                \
        }                                                                           \
    } while (0)
#define CU_CHECK(call)                                                              \
    do {                                                                            \
        CUresult r_ = (call);                                                       \
        if (r_ != CUDA_SUCCESS) {                                                   \
            const char* s_ = nullptr;                                               \
            cuGetErrorName(r_, &s_);                                                \
            printf("driver error %s at %s:%d: %s\n", s_ ? s_ : "?", __FILE__,       \
                   __LINE__, #call);                                                \
            exit(2);                                                                \
        }                                                                           \
    } while (0)

// Kernel i adds i to buf[i % 64]; the kernel whose i equals *bad stores to 0x10 instead.
__global__ void bump(int* buf, int i, const int* bad) {
    if (threadIdx.x == 0) {
        if (*bad == i) *reinterpret_cast<volatile int*>(uintptr_t(0x10)) = 1;
        buf[i % 64] += i;
    }
}

// The inline variant's reset (a kernel: memset nodes on host-mapped memory are what the side
// variant tries).
__global__ void reset_slots(unsigned long long* slots, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) slots[i] = 0;
}

struct Graphs {
    int n;
    cudaGraph_t plain;
    cudaGraphExec_t plain_exec, marked_exec, inline_exec;
    std::vector<CUgraphNode> kernels;  // in the marked clone, in chain order
};

static uint64_t* slots_host;
static CUdeviceptr slots_dev;

static Graphs build(int n, cudaStream_t s, int* buf, const int* bad) {
    Graphs g{};
    g.n = n;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; ++i) bump<<<1, 32, 0, s>>>(buf, i, bad);
    CHECK(cudaStreamEndCapture(s, &g.plain));
    CHECK(cudaGraphInstantiate(&g.plain_exec, g.plain, 0));

    CUgraph marked;
    CU_CHECK(cuGraphClone(&marked, g.plain));
    size_t count = 0;
    CU_CHECK(cuGraphGetNodes(marked, nullptr, &count));
    std::vector<CUgraphNode> nodes(count);
    CU_CHECK(cuGraphGetNodes(marked, nodes.data(), &count));
    // Chain order: the root kernel, then follow the single dependency edges. Simpler and enough
    // for a chain: each kernel's position is its number of transitive predecessors, which for a
    // captured chain equals the order of cuGraphGetNodes (checked below against the marks).
    CUcontext ctx;
    CU_CHECK(cuCtxGetCurrent(&ctx));
    std::vector<CUgraphNode> all = nodes;
    for (size_t k = 0; k < count; ++k) {
        CUgraphNodeType type;
        CU_CHECK(cuGraphNodeGetType(nodes[k], &type));
        if (type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
        size_t i = g.kernels.size();
        g.kernels.push_back(nodes[k]);
        CUstreamBatchMemOpParams op;
        memset(&op, 0, sizeof op);
        op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        op.writeValue.address = slots_dev + 8 * i;
        op.writeValue.value64 = i + 1;
        op.writeValue.flags = 0;
        CUDA_BATCH_MEM_OP_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.ctx = ctx;
        p.count = 1;
        p.paramArray = &op;
        p.flags = 0;
        CUgraphNode mark;
        CU_CHECK(cuGraphAddBatchMemOpNode(&mark, marked, &nodes[k], 1, &p));
        all.push_back(mark);
    }
    CUDA_MEMSET3D ms;
    memset(&ms, 0, sizeof ms);
    ms.dst = slots_dev;
    ms.value = 0;
    ms.elementSize = 4;
    ms.width = 2 * g.kernels.size();
    ms.height = 1;
    ms.pitch = 0;
    CUgraphNode reset;
    CU_CHECK(cuGraphAddMemsetNode(&reset, marked, all.data(), all.size(), &ms, ctx));
    CHECK(cudaGraphInstantiate(&g.marked_exec, marked, 0));

    // Inline: marks on the chain, by capture.
    cudaGraph_t inl;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < n; ++i) {
        bump<<<1, 32, 0, s>>>(buf, i, bad);
        CU_CHECK(cuStreamWriteValue64(reinterpret_cast<CUstream>(s), slots_dev + 8 * i, i + 1, 0));
    }
    reset_slots<<<(n + 255) / 256, 256, 0, s>>>(reinterpret_cast<unsigned long long*>(slots_dev), n);
    CHECK(cudaStreamEndCapture(s, &inl));
    CHECK(cudaGraphInstantiate(&g.inline_exec, inl, 0));
    return g;
}

static double replay_us(cudaGraphExec_t e, cudaStream_t s, int times) {
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < times; ++k) CHECK(cudaGraphLaunch(e, s));
    CHECK(cudaStreamSynchronize(s));
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / times;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char** argv) {
    const bool side = argc > 1 && strcmp(argv[1], "side") == 0;
    CHECK(cudaFree(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaHostAlloc(reinterpret_cast<void**>(&slots_host), 8 * 1024, cudaHostAllocMapped));
    memset(slots_host, 0, 8 * 1024);
    void* dev = nullptr;
    CHECK(cudaHostGetDevicePointer(&dev, slots_host, 0));
    slots_dev = reinterpret_cast<CUdeviceptr>(dev);
    int *buf, *bad;
    CHECK(cudaMalloc(&buf, 64 * sizeof(int)));
    CHECK(cudaMalloc(&bad, sizeof(int)));
    const int none = -1;
    CHECK(cudaMemcpy(bad, &none, sizeof none, cudaMemcpyHostToDevice));

    Graphs g100{};
    for (int n : {10, 100, 1000}) {
        Graphs g = build(n, s, buf, bad);
        replay_us(g.plain_exec, s, 5);
        replay_us(g.marked_exec, s, 5);
        replay_us(g.inline_exec, s, 5);
        std::vector<double> plain, marked, inl;
        for (int round = 0; round < 7; ++round) {
            plain.push_back(replay_us(g.plain_exec, s, 50));
            marked.push_back(replay_us(g.marked_exec, s, 50));
            inl.push_back(replay_us(g.inline_exec, s, 50));
        }
        double mp = median(plain), mm = median(marked), mi = median(inl);
        printf("R1 cost N=%d: replay median %.1f us plain, %.1f us side-branch marks (%+.3f us per kernel), "
               "%.1f us inline marks (%+.3f us per kernel); min %.1f / %.1f / %.1f us\n",
               n, mp, mm, (mm - mp) / n, mi, (mi - mp) / n, *std::min_element(plain.begin(), plain.end()),
               *std::min_element(marked.begin(), marked.end()), *std::min_element(inl.begin(), inl.end()));
        // R2: same work done: one replay of each from a zeroed buffer.
        int a[64], b[64];
        CHECK(cudaMemset(buf, 0, 64 * sizeof(int)));
        CHECK(cudaGraphLaunch(g.plain_exec, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(a, buf, sizeof a, cudaMemcpyDeviceToHost));
        CHECK(cudaMemset(buf, 0, 64 * sizeof(int)));
        CHECK(cudaGraphLaunch(g.marked_exec, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(b, buf, sizeof b, cudaMemcpyDeviceToHost));
        int c[64];
        CHECK(cudaMemset(buf, 0, 64 * sizeof(int)));
        CHECK(cudaGraphLaunch(g.inline_exec, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(c, buf, sizeof c, cudaMemcpyDeviceToHost));
        printf("R2 inline N=%d: buffers %s\n", n, memcmp(a, c, sizeof a) == 0 ? "identical" : "DIFFER");
        bool slots_clear = true;
        for (size_t i = 0; i < g.kernels.size(); ++i) slots_clear = slots_clear && slots_host[i] == 0;
        printf("R2 results N=%d: buffers %s; slots after a completed replay: %s\n", n,
               memcmp(a, b, sizeof a) == 0 ? "identical" : "DIFFER",
               slots_clear ? "reset to 0 (tail memset ran)" : "NOT reset");
        if (n == 100) g100 = g;
    }

    // R3: a faulting replay of the marked N=100 graph.
    const int fault_at = 37;
    CHECK(cudaMemcpy(bad, &fault_at, sizeof fault_at, cudaMemcpyHostToDevice));
    CHECK(cudaGraphLaunch(side ? g100.marked_exec : g100.inline_exec, s));
    cudaError_t e = cudaStreamSynchronize(s);
    int set = 0, first_unset = -1;
    for (int i = 0; i < g100.n; ++i) {
        if (slots_host[i] != 0) {
            ++set;
        } else if (first_unset < 0) {
            first_unset = i;
        }
    }
    printf("R3 fault (%s marks): sync returned %s; %d of %d slots set (expected %d), first unset slot %d "
           "(expected %d, the faulting kernel): markers inside graphs %s\n",
           side ? "side-branch" : "inline", cudaGetErrorName(e), set, g100.n, fault_at, first_unset, fault_at,
           (set == fault_at && first_unset == fault_at) ? "name the faulting node" : "do NOT name it");
    return 0;
}
