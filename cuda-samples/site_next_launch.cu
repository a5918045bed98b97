// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuLaunchKernel
//
// site_next_launch.cu: the sticky error is reported by the *next kernel
// launch*, an innocent one (see late_fault.cuh for the culprit and timing).
//
// Timeline (legacy default stream):
//   launch_warm_up()        warm_up     -> good; cudaDeviceSynchronize proves it done
//   launch_late_fault()     late_fault  -> CULPRIT: waits 10 ms on the GPU, then
//                                          stores through 0x10 -> 700
//   wait_for_fault()                    -> host sleeps 200 ms: the context is dead
//   launch_warm_up()        warm_up     -> REPORTS: the launch itself returns
//                                          cudaErrorIllegalAddress
//
// A launch refused because of an earlier fault is not a culprit: the report
// must name late_fault, exact (the only unfinished op of the only stream).
// cudart's <<<>>> goes through cuLaunchKernel (or cuLaunchKernelEx); the
// reporter= substring matches both.
//
// Expected: "sample-error: cudaErrorIllegalAddress at launch_warm_up(buf, n,
// 0) ...", exit 1.
#include "late_fault.cuh"

int main() {
    const int n = 1024;
    int* buf = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(launch_warm_up(buf, n, 0));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_late_fault(0));
    wait_for_fault();
    CHECK(launch_warm_up(buf, n, 0));  // the next launch reports
    CHECK(cudaDeviceSynchronize());    // backstop
    printf("unexpected: no error\n");
    return 0;
}
