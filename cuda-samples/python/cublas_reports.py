# EXPECT kernel=index error=CUDA_ERROR_ASSERT confidence=exact reporter=cuLaunchKernel pysite=gather_rows hint="an indexing kernel"
#
# cublas_reports.py: our bad kernel, reported from inside cuBLAS.
#
# A bad index op (ours) asserts on the device; the next CUDA work the
# program does is a matmul, so cuBLAS is the first to hit the dead context:
# PyTorch raises "CUBLAS_STATUS_EXECUTION_FAILED when calling cublasSgemm"
# (or similar), which sends people hunting for a cuBLAS bug. The culprit is
# the element-wise index kernel launched from gather_rows (pysite=).
#
# Timeline (legacy default stream):
#   warm-up: a @ b, result freed, synchronize  -> cuBLAS handle + workspace
#                                                 created, and the caching
#                                                 allocator holds a block of
#                                                 the result's size, so the
#                                                 real matmul needs no cudaMalloc
#   gather_rows(x, idx)    index kernel        -> CULPRIT, idx == len(x): 710
#   time.sleep(0.5)                            -> the assert has fired
#   project(a, b)          torch.matmul        -> REPORTS: cuBLAS's kernel launch
#                                                 (cuLaunchKernel or
#                                                 cuLaunchKernelEx, both
#                                                 contain reporter=) returns
#                                                 the sticky error
#
# Expected: uncaught RuntimeError (cuBLAS status) or torch.AcceleratorError,
# the same with and without the shim; exit status 1.
import time

import torch

N = 1024


def gather_rows(x, idx):
    return x[idx]


def project(a, b):
    return torch.matmul(a, b)


def main():
    torch.manual_seed(0)
    a = torch.randn(N, N, device="cuda")
    b = torch.randn(N, N, device="cuda")
    x = torch.arange(64, dtype=torch.float32, device="cuda")
    idx = torch.tensor([0, 63, 64, 5], device="cuda")  # BUG: valid indices are 0..63
    warm = project(a, b)
    del warm
    torch.cuda.synchronize()

    picked = gather_rows(x, idx)
    time.sleep(0.5)  # host-side work; the device-side assert fires meanwhile
    y = project(a, b)  # cuBLAS reports
    print("sum:", (y.sum() + picked.sum()).item())


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
