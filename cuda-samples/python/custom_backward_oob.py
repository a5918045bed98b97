# EXPECT kernel=index error=CUDA_ERROR_ASSERT confidence=exact pysite=RoutedScale.backward hint="an indexing kernel"
#
# custom_backward_oob.py: a bad index inside the backward of a custom
# torch.autograd.Function written in Python.
#
# loss.backward() makes autograd run the backward graph on its CUDA worker
# thread (pt_autograd_0), which calls RoutedScale.backward in Python there.
# Its grad[route] uses a route table with an entry equal to len(grad): the
# element-wise index kernel (at::native::index_elementwise_kernel<...>)
# asserts "index out of bounds" -> 710 (cudaErrorAssert, sticky). The error
# comes back to the main thread as an exception from loss.backward() (or at
# .item()).
#
# The culprit's Python stack: RoutedScale.backward (pysite=, a real frame on
# the autograd thread), torch's BackwardCFunction.apply, then the frames of
# the main thread that called backward() (python_stack_from_thread names
# it): torch's backward frames and main at the loss.backward() line.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch


class RoutedScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, route):
        ctx.save_for_backward(route)
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (route,) = ctx.saved_tensors
        # BUG: the route table was built for one more element than grad has.
        return grad[route] * 2, None


def main():
    x = torch.randn(16, device="cuda", requires_grad=True)
    route = torch.arange(1, 17, device="cuda")  # 1..16: 16 is out of range
    loss = RoutedScale.apply(x, route).sum()
    loss.backward()
    print("grad sum:", x.grad.sum().item())  # the device-side assert surfaces here at the latest


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
