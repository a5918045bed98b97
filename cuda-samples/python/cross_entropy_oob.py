# EXPECT kernel=nll_loss error=CUDA_ERROR_ASSERT confidence=exact pysite=compute_loss hint="number of classes"
#
# cross_entropy_oob.py: the seed PyTorch case.
#
# A 10-class classifier gets a target containing the value 10 (== number of
# classes). F.cross_entropy = log_softmax + nll_loss; nll_loss's CUDA kernel
# (at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float,
# float, long> in torch 2.11) has
# CUDA_KERNEL_ASSERT(t >= 0 && t < n_classes), which fails -> 710
# (cudaErrorAssert, sticky).
#
# Nothing reports the error at the launch: compute_loss() returns normally.
# loss.backward() then launches more kernels, and one of those launches gets
# the sticky error back (on the H200 with torch 2.11: the fill kernel of
# torch.ones_like in autograd's _make_grads), raising
# "torch.AcceleratorError: CUDA error: device-side assert triggered" --
# far away from the culprit. Were the launches all to succeed, loss.item()
# (copy + sync) would raise it. The shim must still blame the nll_loss kernel,
# launched (per the Python stack) from compute_loss().
#
# No site= in the EXPECT line: the native frames around the launch are
# libtorch functions, not ours. The Python-level site is compute_loss
# (pysite=: culprit.op.python_stack, innermost first: torch's
# functional.cross_entropy, then compute_loss at the F.cross_entropy line).
#
# Expected: uncaught exception, exit status 1.
import torch
import torch.nn.functional as F

NUM_CLASSES = 10


def compute_loss(model, x, target):
    logits = model(x)  # [8, 10]
    return F.cross_entropy(logits, target)


def main():
    torch.manual_seed(0)
    model = torch.nn.Linear(16, NUM_CLASSES).cuda()
    x = torch.randn(8, 16, device="cuda")
    # BUG: labels are 0..9, but one sample is labelled 10.
    target = torch.tensor([1, 3, 0, 9, NUM_CLASSES, 2, 5, 7], device="cuda")

    loss = compute_loss(model, x, target)
    loss.backward()
    print("loss:", loss.item())  # the device-side assert surfaces here at the latest


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
