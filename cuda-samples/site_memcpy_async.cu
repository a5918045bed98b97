// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact|oneof reporter=cuMemcpy|cuStreamSynchronize
// EXPECT-EVERY confidence=exact
//
// site_memcpy_async.cu: the sticky error is reported by an *asynchronous*
// copy, or by the stream synchronization right after it (see late_fault.cuh
// for the culprit and timing).
//
// Timeline (one non-blocking stream s, pinned host buffer):
//   launch_warm_up(s)       warm_up     -> good; cudaStreamSynchronize proves it done
//   launch_late_fault(s)    late_fault  -> CULPRIT, 700 after 10 ms
//   wait_for_fault()                    -> host sleeps 200 ms
//   cudaMemcpyAsync(DtoH, s)            -> REPORTS: the enqueue returns the error,
//                                          or is accepted on the dead context
//   cudaStreamSynchronize(s)            -> ... then this REPORTS it
//
// reporter=cuMemcpy|cuStreamSynchronize: cudart may implement
// cudaMemcpyAsync with cuMemcpyDtoHAsync_v2 or the generic cuMemcpyAsync
// (both hooked, both names contain "cuMemcpy"); and the driver need not
// refuse an asynchronous copy on a context that died meanwhile: on the H200
// (driver 580, 2026-12-01) the copy was enqueued successfully and the error
// surfaced at the cudaStreamSynchronize backstop. A refused copy is never
// enqueued and is no culprit: exact, late_fault, the only unfinished op. An
// accepted copy is recorded behind late_fault: with budgeted markers
// late_fault (launched microseconds after the stream's last marker) has none
// behind it, so the verdict is "one of these 2 ops" (late_fault ranked first:
// the copy runs no user code); with CUDABLAME_MARKERS=every it is exact.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaMemcpyAsync(...)
// ...", exit 1.
#include "late_fault.cuh"

int main() {
    const int n = 1024;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int *buf = nullptr, *host = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(cudaMallocHost(&host, n * sizeof(int)));
    CHECK(launch_warm_up(buf, n, s));
    CHECK(cudaStreamSynchronize(s));

    CHECK(launch_late_fault(s));
    wait_for_fault();
    CHECK(cudaMemcpyAsync(host, buf, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));  // backstop
    printf("unexpected: no error, host[1]=%d\n", host[1]);
    return 0;
}
