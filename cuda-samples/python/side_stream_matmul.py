# EXPECT kernel=index error=CUDA_ERROR_ASSERT confidence=exact pysite=lookup_on_side_stream hint="an indexing kernel"
# Measured on the H200 (2026-11-29): the default stream had drained when the side stream faulted, so
# only the side stream had unfinished work and the verdict was exact (right kernel, right line).
#
# side_stream_matmul.py: a bad index op on a side torch.cuda.Stream while the
# default stream is busy with big matmuls (say, a prefetch or bookkeeping
# stream beside the model's compute).
#
# Timeline:
#   warm-up matmul + synchronize   cuBLAS handle and workspace ready, inputs done
#   default (legacy) stream:       16 x mm(4096x4096 fp32), ~2-3 ms each on an
#                                  H200: ~40 ms of queued cuBLAS kernels
#   side stream (high priority):   table[idx] with idx == len(table): the
#                                  element-wise index kernel asserts "index out
#                                  of bounds" -> 710 (CULPRIT, launched last)
#   torch.cuda.synchronize()       -> REPORTS (cuCtxSynchronize)
#
# Why confidence=likely and not exact: when the assert kills the context,
# the default stream is still in its matmuls (the side stream has high
# priority, so its kernel runs at the next CTA boundary of the running GEMM,
# long before the queued GEMMs finish). Two streams then have a first
# unfinished op: a matmul kernel on the default stream and the index kernel
# on the side stream. The progress markers cannot tell which one faulted;
# cudablame ranks the most recently launched one first, the index kernel:
# likely (the matmul comes first in the suspects). It would only be exact if
# the default stream had drained before the fault, which ~40 ms of queued
# GEMMs rule out.
#
# Nothing is launched between the culprit and the synchronize, so the error
# surfaces at the same call with and without the shim (a later matmul launch
# could otherwise win a race against the fault and change the exception).
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered",
# exit status 1.
import torch

N = 4096


def lookup_on_side_stream(table, idx):
    return table[idx]


def main():
    torch.manual_seed(0)
    a = torch.randn(N, N, device="cuda")
    b = torch.randn(N, N, device="cuda")
    c = torch.empty(N, N, device="cuda")
    table = torch.arange(1000, dtype=torch.float32, device="cuda")
    idx = torch.tensor([3, 999, 1000, 7], device="cuda")  # BUG: valid indices are 0..999
    torch.mm(a, b, out=c)
    torch.cuda.synchronize()

    side = torch.cuda.Stream(priority=-1)
    for _ in range(16):
        torch.mm(a, b, out=c)  # default stream: ~40 ms of work
    with torch.cuda.stream(side):
        picked = lookup_on_side_stream(table, idx)
    torch.cuda.synchronize()  # the device-side assert surfaces here
    print("picked:", picked.sum().item(), c[0, 0].item())


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
