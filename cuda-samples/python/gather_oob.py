# EXPECT kernel=scatter_gather error=CUDA_ERROR_ASSERT confidence=exact pysite=pick_scores hint="a gather kernel"
#
# gather_oob.py: torch.gather along dim 1 with an index equal to the size of
# that dimension.
#
# gather on CUDA runs at::native::_scatter_gather_elementwise_kernel, which
# has CUDA_KERNEL_ASSERT(idx_dim >= 0 && idx_dim < index_size && "gather
# index out of bounds") -> 710 (cudaErrorAssert, sticky). The host only
# checks shapes. The launch is made from pick_scores (pysite=).
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch


def pick_scores(scores, choice):
    return torch.gather(scores, 1, choice)


def main():
    scores = torch.randn(4, 6, device="cuda")
    # BUG: valid column indices are 0..5.
    choice = torch.tensor([[0], [5], [6], [2]], device="cuda")
    picked = pick_scores(scores, choice)
    print("sum:", picked.sum().item())  # the device-side assert surfaces here at the latest


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
