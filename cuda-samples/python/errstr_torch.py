# EXPECT kernel=nll_loss error=CUDA_ERROR_ASSERT confidence=exact pysite=compute_loss
#
# errstr_torch.py: the culprit in the exception PyTorch raises (issue 23). Also run by
# scripts/gpu-errstr.sh in both modes:
#   python errstr_torch.py [assert]   nll_loss with a target equal to the number of classes:
#                                     device-side assert (710) in nll_loss_forward_reduce_cuda_kernel_2d
#   python errstr_torch.py MODE raise  the same, uncaught (the traceback as a user sees it)
#   python errstr_torch.py illegal    a Triton kernel storing at GPU address 0x10 (as
#                                     triton_oob.py): illegal address (700) in scatter_blocks_kernel
# The script catches the exception and prints
#   errstr-launch-line: N         the line of this file that launched the culprit
#   errstr-str: <repr(str(e))>    what PyTorch put in the message
#   errstr-type: <type(e).__name__>
# Under cudablame, str(e) must read "CUDA error: <text> [cudablame: culprit KERNEL, launched at
# errstr_torch.py:N (exact); report PATH]\n..." (gpu-errstr.sh checks KERNEL and N); without it
# the message is PyTorch's own.
#
# Expected: exit 0 (the exception is caught).
import sys

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl

    @triton.jit
    def scatter_blocks_kernel(out_ptr, stride, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * stride + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, offs.to(tl.float32))  # BUG: no mask

except ImportError:
    scatter_blocks_kernel = None


def line_of(marker):
    for n, text in enumerate(open(__file__), 1):
        if text.rstrip().endswith("# @" + marker):
            return n
    return 0


def compute_loss(logits, target):
    return F.nll_loss(F.log_softmax(logits, dim=1), target)  # @assert


def assert_case():
    logits = torch.randn(8, 10, device="cuda")
    target = torch.full((8,), 10, device="cuda")  # BUG: 10 classes, valid targets are 0..9
    loss = compute_loss(logits, target)
    return loss.item()  # the assert surfaces here (or at an earlier launch)


def illegal_case():
    if scatter_blocks_kernel is None:
        raise SystemExit("errstr-skip: triton is not importable")
    out = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    # As triton_oob.py: program 1 stores at GPU address 0x10, never mapped.
    stride = (0x10 - out.data_ptr()) // 4
    scatter_blocks_kernel[(2,)](out, stride, BLOCK=16)  # @illegal
    torch.cuda.synchronize()  # the illegal address surfaces here
    return out.sum().item()


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "assert"
    print(f"errstr-launch-line: {line_of(mode)}", flush=True)
    if sys.argv[2:] == ["raise"]:  # uncaught: the traceback as a user sees it (README)
        (illegal_case if mode == "illegal" else assert_case)()
        return
    try:
        (illegal_case if mode == "illegal" else assert_case)()
        print("errstr-str: (no exception)")
    except Exception as e:  # torch.AcceleratorError (torch >= 2.8), RuntimeError before
        print(f"errstr-type: {type(e).__name__}")
        print(f"errstr-str: {str(e)!r}", flush=True)


if __name__ == "__main__":
    main()
