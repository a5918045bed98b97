// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuMemFree
//
// site_free.cu: the sticky error is reported by cudaFree of an unrelated
// buffer (see late_fault.cuh for the culprit and timing); typical of
// cleanup code and destructors, far from the bug.
//
// Timeline (legacy default stream):
//   launch_warm_up()        warm_up     -> good; cudaDeviceSynchronize proves it done
//   launch_late_fault()     late_fault  -> CULPRIT, 700 after 10 ms
//   wait_for_fault()                    -> host sleeps 200 ms
//   cudaFree(scratch)                   -> REPORTS (driver: cuMemFree_v2)
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaFree(scratch) ...",
// exit 1.
#include "late_fault.cuh"

int main() {
    const int n = 1024;
    int *buf = nullptr, *scratch = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(cudaMalloc(&scratch, 16 << 20));
    CHECK(launch_warm_up(buf, n, 0));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_late_fault(0));
    wait_for_fault();
    CHECK(cudaFree(scratch));
    CHECK(cudaDeviceSynchronize());  // backstop
    printf("unexpected: no error\n");
    return 0;
}
