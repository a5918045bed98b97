// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuStreamQuery
//
// site_stream_query.cu: the sticky error is reported by cudaStreamQuery in a
// polling loop (a host thread that overlaps CPU work with the GPU and checks
// now and then whether the stream is done). See late_fault.cuh for the
// culprit.
//
// Timeline (one non-blocking stream s):
//   launch_warm_up(s)       warm_up     -> good; cudaStreamSynchronize proves it done
//   launch_late_fault(s)    late_fault  -> CULPRIT, 700 after 10 ms
//   poll_until_done(s)      cudaStreamQuery every 1 ms: cudaErrorNotReady
//                           (not an error; the shim ignores it) ~10 times, then
//                           -> REPORTS cudaErrorIllegalAddress (cuStreamQuery)
//
// No wait_for_fault() here: the polling loop is the wait. It gives up after
// 5 s so a wrong expectation cannot hang the run.
//
// Expected: "sample-error: cudaErrorIllegalAddress at poll_until_done(s)
// ...", exit 1.
#include "late_fault.cuh"

cudaError_t poll_until_done(cudaStream_t s) {
    for (int polls = 0; polls < 5000; ++polls) {
        cudaError_t e = cudaStreamQuery(s);
        if (e != cudaErrorNotReady) return e;
        usleep(1000);  // "other CPU work"
    }
    return cudaErrorNotReady;
}

int main() {
    const int n = 1024;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int* buf = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(launch_warm_up(buf, n, s));
    CHECK(cudaStreamSynchronize(s));

    CHECK(launch_late_fault(s));
    CHECK(poll_until_done(s));
    CHECK(cudaDeviceSynchronize());  // backstop
    printf("unexpected: no error\n");
    return 0;
}
