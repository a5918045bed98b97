# EXPECT kernel=binary_cross_entropy error=CUDA_ERROR_ASSERT confidence=exact pysite=bce_loss hint="must lie in [0, 1]"
#
# bce_input_range.py: F.binary_cross_entropy given raw scores (one above 1)
# instead of probabilities.
#
# The CUDA kernel of binary_cross_entropy (an elementwise kernel whose
# functor is binary_cross_entropy_out_cuda's lambda) has
# CUDA_KERNEL_ASSERT(input_val >= zero && input_val <= one) -> 710
# (cudaErrorAssert, sticky). The launch is made from bce_loss (pysite=),
# through torch's F.binary_cross_entropy.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch
import torch.nn.functional as F


def bce_loss(pred, target):
    return F.binary_cross_entropy(pred, target)


def main():
    # BUG: the model's last layer has no sigmoid: 1.5 is not a probability.
    pred = torch.tensor([0.2, 0.9, 1.5, 0.4], device="cuda")
    target = torch.tensor([0.0, 1.0, 1.0, 0.0], device="cuda")
    loss = bce_loss(pred, target)
    print("loss:", loss.item())  # the device-side assert surfaces here at the latest


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
