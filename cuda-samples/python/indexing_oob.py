# EXPECT kernel=index error=CUDA_ERROR_ASSERT confidence=exact pysite=gather_rows hint="an indexing kernel"
#
# indexing_oob.py: advanced indexing x[idx] on CUDA with an index equal to
# len(x).
#
# PyTorch does not bounds-check CUDA indices on the host (that would need a
# sync); the gather kernel (at::native::index_elementwise_kernel<...
# index_kernel_impl ...>) asserts "index out of bounds" on the device -> 710
# (cudaErrorAssert). The error surfaces later: on the H200 at the launch of
# the multiply in (y * 2), at .item() at the latest.
# x is 1-D float32 so PyTorch takes the generic element-wise index kernel
# (whose demangled name contains "index"), not a vectorized row-gather one.
#
# The launch happens inside gather_rows (pysite=): x[idx] is a C call from
# that frame, so gather_rows is the innermost Python frame of the culprit.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch


def gather_rows(x, idx):
    return x[idx]


def main():
    x = torch.arange(32, dtype=torch.float32, device="cuda")
    # BUG: valid indices are 0..31.
    idx = torch.tensor([0, 5, 31, 32, 7], device="cuda")
    y = gather_rows(x, idx)
    z = (y * 2).sum()
    print("sum:", z.item())  # the device-side assert surfaces here at the latest


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
