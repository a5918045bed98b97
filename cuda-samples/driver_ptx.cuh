// driver_ptx.cuh: the PTX kernels and helpers shared by the driver-API samples (driver_api.cu,
// two_contexts.cu, marker_other_context.cu). Not a sample itself: gpu-check.sh builds only
// cuda-samples/*.cu.
//
// PTX_STORE_INDEX_KERNEL(NAME): a kernel NAME(out, n) storing out[i] = i for i < n. kPtx (with
// PTX_WITH_CONTEXT_HELPERS): ptx_fill and ptx_scatter of that body, and ptx_slow, a spin of
// 400M cycles; PTX ISA 8.0 (CUDA 12.0), target sm_75: the driver JIT-compiles it for the GPU.
#pragma once

#include <cuda.h>

#define PTX_STORE_INDEX_KERNEL(NAME)                                             \
    ".visible .entry " NAME "(\n"                                                \
    "    .param .u64 " NAME "_out,\n"                                            \
    "    .param .u32 " NAME "_n\n"                                               \
    ")\n"                                                                        \
    "{\n"                                                                        \
    "    .reg .pred %p<2>;\n"                                                    \
    "    .reg .b32 %r<5>;\n"                                                     \
    "    .reg .b64 %rd<5>;\n"                                                    \
    "    ld.param.u64 %rd1, [" NAME "_out];\n"                                   \
    "    ld.param.u32 %r1, [" NAME "_n];\n"                                      \
    "    mov.u32 %r2, %ctaid.x;\n"                                               \
    "    mov.u32 %r3, %ntid.x;\n"                                                \
    "    mov.u32 %r4, %tid.x;\n"                                                 \
    "    mad.lo.s32 %r2, %r2, %r3, %r4;\n"                                       \
    "    setp.ge.s32 %p1, %r2, %r1;\n"                                           \
    "    @%p1 bra $L_" NAME "_done;\n"                                           \
    "    cvta.to.global.u64 %rd2, %rd1;\n"                                       \
    "    mul.wide.s32 %rd3, %r2, 4;\n"                                           \
    "    add.s64 %rd4, %rd2, %rd3;\n"                                            \
    "    st.global.u32 [%rd4], %r2;\n"                                           \
    "$L_" NAME "_done:\n"                                                        \
    "    ret;\n"                                                                 \
    "}\n"

#ifdef PTX_WITH_CONTEXT_HELPERS
static const char kPtx[] =
    ".version 8.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    "\n" PTX_STORE_INDEX_KERNEL("ptx_fill") "\n" PTX_STORE_INDEX_KERNEL("ptx_scatter")
    "\n"
    ".visible .entry ptx_slow(\n"
    "    .param .u64 ptx_slow_out,\n"
    "    .param .u32 ptx_slow_n\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b64 %rd<5>;\n"
    "    mov.u64 %rd1, 400000000;\n"
    "    mov.u64 %rd2, %clock64;\n"
    "$L_spin:\n"
    "    mov.u64 %rd3, %clock64;\n"
    "    sub.s64 %rd4, %rd3, %rd2;\n"
    "    setp.lt.s64 %p1, %rd4, %rd1;\n"
    "    @%p1 bra $L_spin;\n"
    "    ret;\n"
    "}\n";

// cuCtxCreate gained a CUctxCreateParams* parameter in CUDA 13 (cuCtxCreate_v4).
static CUresult create_context(CUcontext* ctx, CUdevice dev) {
#if CUDA_VERSION >= 13000
    CUctxCreateParams params = {};  // no execution affinity, no CIG: a plain context
    return cuCtxCreate(ctx, &params, 0, dev);
#else
    return cuCtxCreate(ctx, 0, dev);
#endif
}

__attribute__((noinline)) CUresult launch_in_context(CUfunction f, CUstream s, CUdeviceptr out,
                                                     int n) {
    void* args[] = {&out, &n};
    return cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr);
}
#endif  // PTX_WITH_CONTEXT_HELPERS
