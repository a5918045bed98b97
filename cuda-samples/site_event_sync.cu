// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuEventSynchronize
//
// site_event_sync.cu: the sticky error is reported by cudaEventSynchronize
// on an event recorded behind the culprit (see late_fault.cuh for the
// culprit and timing).
//
// Timeline (one non-blocking stream s):
//   launch_warm_up(s)       warm_up     -> good; cudaStreamSynchronize proves it done
//   launch_late_fault(s)    late_fault  -> CULPRIT, 700 after 10 ms
//   cudaEventRecord(done, s)            -> succeeds: recorded microseconds after
//                                          the launch, long before the fault
//   wait_for_fault()                    -> host sleeps 200 ms
//   cudaEventSynchronize(done)          -> REPORTS (driver: cuEventSynchronize)
//
// An event names no stream at all; the shim must still blame the culprit:
// exact, the only unfinished op.
//
// Expected: "sample-error: cudaErrorIllegalAddress at
// cudaEventSynchronize(done) ...", exit 1.
#include "late_fault.cuh"

int main() {
    const int n = 1024;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    int* buf = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(launch_warm_up(buf, n, s));
    CHECK(cudaStreamSynchronize(s));

    CHECK(launch_late_fault(s));
    CHECK(cudaEventRecord(done, s));
    wait_for_fault();
    CHECK(cudaEventSynchronize(done));
    CHECK(cudaDeviceSynchronize());  // backstop
    printf("unexpected: no error\n");
    return 0;
}
