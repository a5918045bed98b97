# EXPECT kernel=index error=CUDA_ERROR_ASSERT confidence=exact pysite=lookup hint="an indexing kernel"
#
# thread_oob.py: the bad index is used on a Python threading.Thread (a data
# or inference worker), the error is noticed on the main thread.
#
# The worker's x[idx] launches the element-wise index kernel
# (at::native::index_elementwise_kernel<...>), which asserts "index out of
# bounds" -> 710 (cudaErrorAssert, sticky). The worker returns normally;
# the main thread's .item() (or its next launch) gets the error. The culprit
# is the worker's launch: its thread id and its Python frames, innermost
# lookup (pysite=), then worker and threading's frames.
#
# Expected: uncaught torch.AcceleratorError "device-side assert triggered"
# on the main thread, exit status 1.
import threading

import torch


def lookup(table, idx):
    return table[idx]


def worker(table, idx, out):
    out.append(lookup(table, idx))


def main():
    table = torch.arange(10, dtype=torch.float32, device="cuda")
    idx = torch.tensor([1, 4, 10], device="cuda")  # BUG: valid indices are 0..9
    out = []
    t = threading.Thread(target=worker, args=(table, idx, out))
    t.start()
    t.join()
    print("sum:", out[0].sum().item())  # the device-side assert surfaces here at the latest


if __name__ == "__main__":
    main()  # let the exception propagate: non-zero exit
