"""Host cost of cudablame's Python-frame capture under PyTorch (GPU machine): the time per
in-place add on a 1-element CUDA tensor, issued from a function FRAMES Python frames deep. Compare
runs without the shim, with CUDABLAME_PYTHON=off and with it on (default depth 32; set
CUDABLAME_PYTHON_DEPTH=64 to capture all of 50 frames).

Usage: python3 cuda-samples/bench/py_capture.py FRAMES N
Prints add_us=<µs per op, fastest batch of 1000> and frames=<Python frames at the op>.
"""
import sys
import time

import torch


def frames_here():
    f, n = sys._getframe(1), 0
    while f is not None:
        n, f = n + 1, f.f_back
    return n


def loop(n):
    x = torch.zeros(1, device="cuda")
    depth = frames_here()
    for _ in range(1000):
        x.add_(1)
    torch.cuda.synchronize()
    best = None
    for _ in range(max(1, n // 1000)):
        t0 = time.perf_counter_ns()
        for _ in range(1000):
            x.add_(1)
        dt = time.perf_counter_ns() - t0
        best = dt if best is None else min(best, dt)
    torch.cuda.synchronize()
    return best / 1000, depth


def deeper(k, n):
    return loop(n) if k <= 0 else deeper(k - 1, n)


def main():
    frames, n = int(sys.argv[1]), int(sys.argv[2])
    ns, depth = deeper(frames - 3, n)  # <module>, main, deeper (k + 1), loop
    print(f"add_us={ns / 1000:.3f}")
    print(f"frames={depth}")


if __name__ == "__main__":
    main()
