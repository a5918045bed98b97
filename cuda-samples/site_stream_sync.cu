// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuStreamSynchronize
//
// site_stream_sync.cu: the sticky error is reported by cudaStreamSynchronize
// of the culprit's own (non-default) stream (see late_fault.cuh for the
// culprit and timing).
//
// Timeline (one non-blocking stream s):
//   launch_warm_up(s)       warm_up     -> good; cudaStreamSynchronize proves it done
//   launch_late_fault(s)    late_fault  -> CULPRIT, 700 after 10 ms
//   wait_for_fault()                    -> host sleeps 200 ms (a sync would wait
//                                          anyway; the sleep keeps all site_*
//                                          samples alike)
//   cudaStreamSynchronize(s)            -> REPORTS (driver: cuStreamSynchronize)
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaStreamSynchronize(s)
// ...", exit 1.
#include "late_fault.cuh"

int main() {
    const int n = 1024;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int* buf = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(launch_warm_up(buf, n, s));
    CHECK(cudaStreamSynchronize(s));

    CHECK(launch_late_fault(s));
    wait_for_fault();
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaDeviceSynchronize());  // backstop
    printf("unexpected: no error\n");
    return 0;
}
