# EXPECT kernel=scatter_gather error=CUDA_ERROR_ASSERT confidence=exact pysite=accumulate hint="check its indices (the index tensor, in PyTorch)"
#
# scatter_add_negative.py: Tensor.scatter_add_ with a negative index.
#
# scatter/gather indices do not wrap around like Python's: -1 is out of
# bounds. On CUDA scatter_add_ runs at::native::_scatter_gather_elementwise_kernel
# (with an atomic add), which has CUDA_KERNEL_ASSERT(idx_dim >= 0 &&
# idx_dim < index_size && "scatter_add index out of bounds") -> 710
# (cudaErrorAssert, sticky). The launch is made from accumulate (pysite=).
#
# hint=: the kernel's name contains both "scatter" and "gather", and the
# gather row comes first in src/report/hints.rs, so today the report gives
# the gather advice; the substring is common to both rows.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch


def accumulate(totals, bucket, values):
    return totals.scatter_add_(0, bucket, values)


def main():
    totals = torch.zeros(8, device="cuda")
    values = torch.ones(5, device="cuda")
    # BUG: "last bucket" written as -1.
    bucket = torch.tensor([0, 3, 7, -1, 2], device="cuda")
    accumulate(totals, bucket, values)
    print("total:", totals.sum().item())  # the device-side assert surfaces here at the latest


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
