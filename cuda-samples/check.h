// check.h: the error checks shared by the cuda-samples (every sample
// includes it, directly or through late_fault.cuh). Not a sample itself:
// gpu-check.sh builds only cuda-samples/*.cu; nvcc finds this header next to
// the source that includes it ("..." includes search the including file's
// directory first).
//
// A failing call prints one line on stderr and makes the enclosing function
// (main, or anything else returning an int-like exit status) return 1:
//   sample-error: <error name> at <the call, as written>: <error string>
// gpu-check.sh compares the "sample-error: <error name>" token with and
// without the shim (transparency), so every sample must print it this way.
#pragma once

#include <cstdio>
#include <cuda_runtime.h>

// Prints the sample-error line for `e`, returned by `what`; returns 1 (the
// exit status). For a result the sample must look at before failing (see
// busy_stream.cu); CHECK uses it too.
inline int sample_error(cudaError_t e, const char* what) {
    fprintf(stderr, "sample-error: %s at %s: %s\n", cudaGetErrorName(e), what,
            cudaGetErrorString(e));
    return 1;
}

// Runtime API: CHECK(cudaMemcpy(...)).
#define CHECK(call)                                            \
    do {                                                       \
        cudaError_t e_ = (call);                               \
        if (e_ != cudaSuccess) return sample_error(e_, #call); \
    } while (0)

// Driver API: CU_CHECK(cuModuleLoadData(...)). Only for samples that include
// <cuda.h> themselves (and link -lcuda: BUILD-FLAGS); the macro names
// driver types and functions only where it is used, so this header does not
// need <cuda.h>.
#define CU_CHECK(call)                                                            \
    do {                                                                          \
        CUresult r_ = (call);                                                     \
        if (r_ != CUDA_SUCCESS) {                                                 \
            const char *name_ = "?", *text_ = "?";                                \
            cuGetErrorName(r_, &name_);                                           \
            cuGetErrorString(r_, &text_);                                         \
            fprintf(stderr, "sample-error: %s at %s: %s\n", name_, #call, text_); \
            return 1;                                                             \
        }                                                                         \
    } while (0)

// The GPU's global timer in ns (PTX %globaltimer): how the samples' kernels
// wait on the GPU for a set time (spins before a fault, long healthy kernels).
__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
