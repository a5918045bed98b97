"""multi_stream.py: a correct (non-faulting) multi-stream, multi-thread job for scripts/gpu-differential.sh.

Main thread: 4 torch.cuda.Stream()s, each chaining matmul + elementwise ops on its own tensors;
after each round, every stream waits (event) for its neighbour's round and mixes the neighbour's
result into its own (cross-stream dependencies). Two Python threads meanwhile launch their own
chains on their own streams. About 4,600 kernel launches in all.
Memory reuse across streams is made safe with record_stream, so every run computes the same.
Deterministic: fixed seed, cuBLAS workspace config, torch.use_deterministic_algorithms(True).
Prints the elapsed time, then `RESULT multi_stream <sha256>` over the 4 streams' and the 2
threads' final tensors.
"""
import os

# Must be set before torch (cuBLAS) initializes: deterministic cuBLAS workspaces.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import ctypes  # noqa: E402
import hashlib  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

N = 256               # square matrices
STREAMS = 4
ROUNDS = 40           # main-thread rounds
INNER = 3             # matmul + tanh + mul + add chains per stream per round
THREADS = 2
THREAD_ITERS = 300    # chains per thread
LAUNCHES = STREAMS * ROUNDS * (4 * INNER + 2) + THREADS * THREAD_ITERS * 4


def digest(tensors):
    """sha256 over dtype, shape and raw bytes of each tensor (copied to the CPU), in order."""
    h = hashlib.sha256()
    for t in tensors:
        c = t.detach().cpu().contiguous()
        h.update(f"{c.dtype}{tuple(c.shape)};".encode())
        h.update(ctypes.string_at(c.data_ptr(), c.numel() * c.element_size()))
    return h.hexdigest()


def chain(x, w):
    # 4 kernels: matmul, tanh, mul, add; stays bounded in [-0.4, 0.6].
    return torch.tanh(x @ w) * 0.5 + 0.1


def thread_main(idx, x, w, results, errors):
    try:
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):  # the current stream is per thread
            for _ in range(THREAD_ITERS):
                x = chain(x, w)
        s.synchronize()
        results[idx] = x
    except BaseException as e:  # noqa: BLE001  (re-raised by the main thread)
        errors.append(e)


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    dev = "cuda"
    scale = N ** -0.5

    # All random inputs come from the main thread, in a fixed order, before any thread starts.
    thread_inputs = [(torch.randn(N, N, device=dev), torch.randn(N, N, device=dev) * scale)
                     for _ in range(THREADS)]
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]
    xs, ws = [], []
    for s in streams:
        with torch.cuda.stream(s):  # allocated for (and on) the stream that uses them
            xs.append(torch.randn(N, N, device=dev))
            ws.append(torch.randn(N, N, device=dev) * scale)
    torch.cuda.synchronize()

    t0 = time.perf_counter()
    results, errors = [None] * THREADS, []
    threads = [threading.Thread(target=thread_main, args=(i, x, w, results, errors))
               for i, (x, w) in enumerate(thread_inputs)]
    for t in threads:
        t.start()

    events = [torch.cuda.Event() for _ in streams]
    for _ in range(ROUNDS):
        for i, s in enumerate(streams):
            with torch.cuda.stream(s):
                x = xs[i]
                for _ in range(INNER):
                    x = chain(x, ws[i])
                xs[i] = x
                events[i].record(s)
        # Each stream waits for its neighbour's round, then reads the neighbour's tensor.
        prev = list(xs)
        for i, s in enumerate(streams):
            j = (i + 1) % STREAMS
            s.wait_event(events[j])
            with torch.cuda.stream(s):
                xs[i] = prev[i] + 0.25 * prev[j]
            # prev[j] belongs to stream j's pool: keep it from reuse until stream s is done.
            prev[j].record_stream(s)

    for t in threads:
        t.join()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]

    print(f"elapsed {elapsed:.3f} s for about {LAUNCHES} kernel launches "
          f"({STREAMS} streams x {ROUNDS} rounds, {THREADS} threads x {THREAD_ITERS} chains)")
    print(f"RESULT multi_stream {digest(xs + results)}")


if __name__ == "__main__":
    main()
