# EXPECT kernel=scatter_blocks_kernel error=CUDA_ERROR_ILLEGAL_ADDRESS confidence=exact|oneof pysite=scatter_blocks
# EXPECT-EVERY confidence=exact
# Default (budgeted) markers: exact when the culprit launch got a marker or
# was the last op before the reporting call, else "one of these N ops" with
# the culprit among them: timing decides.
# REQUIRES: triton
#
# triton_oob.py: a Triton kernel (not ours to compile: Triton JIT-compiles
# it, loads the cubin with cuModuleLoadData, resolves libcuda through dlsym
# and launches with cuLaunchKernelEx) stores out of bounds without a mask.
#
# The kernel writes BLOCK elements per program at pid * stride; the caller
# passes a stride computed against the wrong base address (here: one that
# puts program 1's block at GPU address 0x10, like the C++ samples' bogus
# pointer), while the tensor has 16 elements. Program 0 stays in bounds;
# program 1 stores at 0x10, where nothing is ever mapped: the GPU faults
# with 700 (cudaErrorIllegalAddress, sticky). There is no device-side bounds
# check (no mask=), so no assert, just the fault.
#
# Why 0x10 and not "far past the tensor": an earlier version stored 1-3 GiB
# past the tensor; what lies there depends on the process's GPU address
# layout, which any extra allocation changes (cudablame's pinned marker
# memory is one), and the H200 answered 700 in one run and 717 in another.
# A fixed unmapped address makes the case deterministic with and without
# cudablame (717 is covered by address_space.cu).
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
    scatter_blocks_kernel[(2,)](out, stride, BLOCK=16)


def main():
    out = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    # BUG: a stride (in elements) measured from the wrong base address; as an int64 it is passed
    # as i64, so program 1 stores at out + 4 * stride = 0x10.
    stride = (0x10 - out.data_ptr()) // 4
    scatter_blocks(out, stride)
    torch.cuda.synchronize()  # the illegal address surfaces here
    print("sum:", out.sum().item())


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
