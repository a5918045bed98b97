// EXPECT kernel=late_fault site=launch_late_fault error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact reporter=cuMemcpyDtoH
//
// site_memcpy.cu: the sticky error is reported by a synchronous cudaMemcpy
// (device to pageable host memory) issued after the GPU has faulted (see
// late_fault.cuh for the culprit and timing).
//
// Timeline (legacy default stream):
//   launch_warm_up()        warm_up     -> good; cudaDeviceSynchronize proves it done
//   launch_late_fault()     late_fault  -> CULPRIT, 700 after 10 ms
//   wait_for_fault()                    -> host sleeps 200 ms
//   cudaMemcpy(DtoH)                    -> REPORTS (driver: cuMemcpyDtoH_v2, as
//                                          checked for oob_write.cu)
//
// Unlike oob_write.cu the copy is issued after the fault, so it fails at
// once instead of waiting for the kernel.
//
// Expected: "sample-error: cudaErrorIllegalAddress at cudaMemcpy(...) ...",
// exit 1.
#include "late_fault.cuh"

int main() {
    const int n = 1024;
    static int host[n];
    int* buf = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(int)));
    CHECK(launch_warm_up(buf, n, 0));
    CHECK(cudaDeviceSynchronize());

    CHECK(launch_late_fault(0));
    wait_for_fault();
    CHECK(cudaMemcpy(host, buf, n * sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(cudaDeviceSynchronize());  // backstop
    printf("unexpected: no error, host[1]=%d\n", host[1]);
    return 0;
}
