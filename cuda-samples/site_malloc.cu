// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuMemAlloc
//
// site_malloc.cu: the sticky error is reported by cudaMalloc, a call that
// has nothing to do with any stream (see late_fault.cuh for the culprit and
// timing). Frameworks allocate all the time, so an allocation is often where
// a fault is first noticed.
//
// Timeline (legacy default stream):
//   launch_warm_up()        warm_up     -> good; cudaDeviceSynchronize proves it done
//   launch_late_fault()     late_fault  -> CULPRIT, 700 after 10 ms
//   wait_for_fault()                    -> host sleeps 200 ms
//   cudaMalloc(64 MiB)                  -> REPORTS (driver: cuMemAlloc_v2; a
//                                          fresh 64 MiB block, so the driver
//                                          really allocates)
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaMalloc(&more, ...)
// ...", exit 1.
#include "late_fault.cuh"

int main() {
    const int n = 1024;
    int *buf = nullptr, *more = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(launch_warm_up(buf, n, 0));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_late_fault(0));
    wait_for_fault();
    CHECK(cudaMalloc(&more, 64 << 20));
    CHECK(cudaDeviceSynchronize());  // backstop
    printf("unexpected: no error\n");
    return 0;
}
