# EXPECT kernel=scatter_blocks_kernel error=CUDA_ERROR_INVALID_ADDRESS_SPACE confidence=exact pysite=scatter_blocks
# Measured on the H200 (2026-11-29): this store faults with CUDA_ERROR_INVALID_ADDRESS_SPACE (717).
# REQUIRES: triton
#
# triton_oob.py: a Triton kernel (not ours to compile: Triton JIT-compiles
# it, loads the cubin with cuModuleLoadData, resolves libcuda through dlsym
# and launches with cuLaunchKernelEx) stores out of bounds without a mask.
#
# The kernel writes BLOCK elements per program at pid * stride; the caller
# passes a stride of 2**28 elements (the element count of a huge tensor it
# meant to use) while the tensor has 16 elements. Program 0 stays in bounds;
# programs 1..3 store 1, 2 and 3 GiB past the tensor, far outside its 2 MiB
# caching-allocator segment, into GPU virtual addresses nothing is mapped
# at: the GPU faults with 700 (cudaErrorIllegalAddress, sticky). There is no
# device-side bounds check (no mask=), so no assert, just the fault.
#
# The kernel name is the @triton.jit function's name, as Triton passes it
# to cuModuleGetFunction. The launch comes from scatter_blocks (pysite=),
# through Triton's JITFunction.run.
#
# Timeline (legacy default stream):
#   torch.zeros(16)                  fill kernel   -> good
#   scatter_blocks(out)              Triton kernel -> CULPRIT, 700
#   torch.cuda.synchronize()                       -> REPORTS (cuCtxSynchronize)
#
# REQUIRES: gpu-check.sh skips the case when triton is not importable.
#
# Expected: uncaught torch.AcceleratorError "an illegal memory access was
# encountered", exit status 1.
import torch
import triton
import triton.language as tl


@triton.jit
def scatter_blocks_kernel(out_ptr, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * stride + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32))  # BUG: no mask=offs < n


def scatter_blocks(out, stride):
    scatter_blocks_kernel[(4,)](out, stride, BLOCK=16)


def main():
    out = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    scatter_blocks(out, 2**28)  # BUG: stride of the tensor it was meant for
    torch.cuda.synchronize()  # the illegal address surfaces here
    print("sum:", out.sum().item())


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
