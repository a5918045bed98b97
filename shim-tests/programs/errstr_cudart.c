/* A stand-in for the shared CUDA runtime's error strings, built by shim-tests/tests/errstr.rs as
 * libcudart.so.13 with a version script, so that a program linked with it references
 * cudaGetErrorString@libcudart.so.13 as PyTorch's libc10_cuda.so does (measured on the H200).
 * The texts are the runtime's own for these codes (driver_types.h, cudaError); the marker
 * " (runtime)" on 702 makes the runtime's text differ from the driver's, to show that the
 * runtime's own text is the one decorated. */
const char *cudaGetErrorString(int error) {
    switch (error) {
    case 0: return "no error";
    case 700: return "an illegal memory access was encountered";
    case 702: return "the launch timed out and was terminated (runtime)";
    case 710: return "device-side assert triggered";
    default: return "unrecognized error code";
    }
}

const char *cudaGetErrorName(int error) {
    switch (error) {
    case 0: return "cudaSuccess";
    case 700: return "cudaErrorIllegalAddress";
    case 702: return "cudaErrorLaunchTimeout";
    case 710: return "cudaErrorAssert";
    default: return "cudaErrorUnknown";
    }
}
