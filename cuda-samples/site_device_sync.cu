// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuCtxSynchronize
//
// site_device_sync.cu: the sticky error is reported by cudaDeviceSynchronize
// (see late_fault.cuh for the culprit and timing).
//
// Timeline (non-blocking stream s; the legacy stream stays empty):
//   launch_warm_up(s)       warm_up     -> good; cudaStreamSynchronize proves it done
//   launch_late_fault(s)    late_fault  -> CULPRIT, 700 after 10 ms
//   wait_for_fault()                    -> host sleeps 200 ms
//   cudaDeviceSynchronize()             -> REPORTS (CUDA 13: cuCtxSynchronize_v2;
//                                          reporter= is a substring)
//
// The device-wide sync names no stream; the shim must still find the one
// stream with unfinished work: exact.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaDeviceSynchronize()
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
    CHECK(cudaDeviceSynchronize());
    printf("unexpected: no error\n");
    return 0;
}
