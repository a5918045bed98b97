# EXPECT kernel=gather_checked_kernel error=CUDA_ERROR_ASSERT confidence=likely pysite=gather_checked assert="index out of range" stdout=same
# (likely, measured on the H200: Triton's assert line names the function "unknown", so it cannot
# pick among the streams with unfinished work; the right kernel still ranks first.)
# REQUIRES: triton
#
# triton_assert.py: a Triton kernel's tl.device_assert fails while a second
# stream is busy with healthy work.
#
# tl.device_assert is compiled in only in debug mode (TRITON_DEBUG=1, set
# below before triton is imported, or @triton.jit(debug=True)). A failing
# assert makes the driver print, from inside libcuda.so.1, on stdout:
#   triton_assert.py:NN: gather_checked_kernel: block: [..], thread: [..]
#   Assertion `index out of range` failed.
# and the context dies with 710. cudablame captures that line without
# changing stdout (stdout=same) and uses its kernel name to pick the culprit.
#
# Timeline:
#   side stream:     spin_matmuls(): 40 chained 2048x2048 matmuls    -> good, busy
#   default stream:  gather_checked(): gather_checked_kernel with one
#                    index == n                                      -> CULPRIT, 710
#   torch.cuda.synchronize()                                         -> REPORTS
# Two streams have unfinished work when the error surfaces (likely by
# markers alone); the assert names gather_checked_kernel: exact.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import os

os.environ.setdefault("TRITON_DEBUG", "1")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit(debug=True)
def gather_checked_kernel(src_ptr, idx_ptr, out_ptr, n, m, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < m
    j = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.device_assert((j >= 0) & (j < n), "index out of range")
    tl.store(out_ptr + offs, tl.load(src_ptr + j, mask=mask), mask=mask)


def gather_checked(src, idx):
    out = torch.empty(idx.numel(), device="cuda")
    gather_checked_kernel[(triton.cdiv(idx.numel(), 64),)](src, idx, out, src.numel(), idx.numel(), BLOCK=64)
    return out


def spin_matmuls(stream, a):
    with torch.cuda.stream(stream):
        for _ in range(40):
            a = a @ a
            a = a / a.norm()
    return a


def main():
    src = torch.arange(256, device="cuda", dtype=torch.float32)
    idx = torch.arange(64, device="cuda", dtype=torch.int64) * 3
    side = torch.cuda.Stream()
    a = torch.randn(2048, 2048, device="cuda")
    gather_checked(src, idx)  # compile and run once with good indices
    torch.cuda.synchronize()
    idx[37] = src.numel()  # BUG: one past the end
    spin_matmuls(side, a)
    out = gather_checked(src, idx)
    torch.cuda.synchronize()  # the assert surfaces here
    print("sum:", out.sum().item())


if __name__ == "__main__":
    main()
