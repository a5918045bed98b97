"""Host cost per launch as seen from Python: N launches of a fake kernel through ctypes, made from
a function DEPTH Python frames deep (the launching frame counted, <module> too).

Usage: python3 py_bench.py DEPTH N [KERNEL [LOOP]]   against the fake driver, with and without the
shim, CUDABLAME_PYTHON=off and on, to isolate the cost of Python-frame capture. KERNEL:
  refused (default)  every launch is refused synchronously by the fake driver (launch_error=1):
                     the hook records the op as usual (stacks, stream lookup) but nothing is queued,
                     so no driver worker thread competes for the CPU and the numbers are stable.
                     cudablame reports the first refusal (run with CUDABLAME_TEXT=off
                     CUDABLAME_REPORT=off) and only counts the rest.
  empty              an empty kernel, really queued on the fake driver's stream worker.
  inline             an empty kernel that the fake driver runs inside the launch call when the
                     stream is idle (`inline=1`): the success path (ring push, progress markers)
                     without a stream worker competing for the CPU, nearly as stable as refused.
  blocked            empty kernels queued behind a 3 s kernel (`delay_us`): the host runs ahead
                     of a blocked stream, as in scripts/bench.sh's host-mode launch loop (every
                     op leaves the ring unproven and is held). Keep N at most about 500000.
LOOP:
  python (default)   one ctypes call per launch (about 1 us of ctypes overhead each).
  c                  one ctypes call into py_bench_loop.c (built here with cc), which launches N
                     times from C with the GIL released and the Python frames in place: the
                     hook's own cost without ctypes noise.
  paired             as c, in batches with cudablame paused and recording in turn (ABBA, through
                     `cudablame_pause`; the shim must be loaded): prints paired_added_ns=<median
                     over the batch pairs of recording minus paused ns per launch>, paused_ns,
                     recording_ns and pairs. The VM's speed drifts between processes far more
                     than within one, so compare libraries by this, one process a library a
                     round, rather than by launch_ns.
With BENCH_PAUSED=1 (LOOP c only) cudablame is paused before the loop: its pass-through alone.
With BENCH_POLLUTE_PAGES=P (LOOP c and paired) P other pages of data and of code are touched between
two launches (py_bench_loop.c): the TLBs evicted as in a framework.
With BENCH_POLLUTE_KB=K (LOOP c only) the C loop writes K KiB of other memory between two
launches, untimed: the hook then meets caches evicted as by a framework's work between launches
(2048 doubles or triples every CUDABLAME_STATS phase, as on the GPU machine in a PyTorch step).
BENCH_POLLUTE_CODE=1 (LOOP c only) also runs 64 KiB of other code between two launches, so that
the instruction cache is evicted too (under cachegrind: the hook's code lines per launch).
Prints launch_ns=<mean ns per launch>, best_batch_ns=<ns per launch in the fastest batch of 1000>
and frames=<Python frames at the launch>.
"""
import ctypes
import sys
import time

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3


IMAGE = (
    b"// fake: empty\n// fake: refused launch_error=1\n// fake: inline inline=1\n"
    b"// fake: blocker delay_us=3000000\n"
    b".entry empty(\n.entry refused(\n.entry inline(\n"
)


def setup(kernel):
    """The function to launch; for `blocked`, the empty kernel behind a launched blocker."""
    dev, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    assert cuda.cuInit(0) == 0
    assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    assert cuda.cuModuleLoadData(ctypes.byref(mod), IMAGE) == 0
    if kernel == "blocked":
        blocker = ctypes.c_void_p()
        assert cuda.cuModuleGetFunction(ctypes.byref(blocker), mod, b"blocker") == 0
        assert cuda.cuLaunchKernel(blocker, 1, 1, 1, 1, 1, 1, 0, None, None, None) == 0
        kernel = "empty"
    assert cuda.cuModuleGetFunction(ctypes.byref(fn), mod, kernel.encode()) == 0
    return fn


def frames_here():
    f, n = sys._getframe(1), 0
    while f is not None:
        n, f = n + 1, f.f_back
    return n


BATCH = 1000


def loop(fn, n):
    """Mean and fastest-batch ns per launch (the fastest batch of BATCH launches filters out
    interrupts and other tenants of a shared machine)."""
    launch = cuda.cuLaunchKernel
    depth = frames_here()
    clock = time.perf_counter_ns
    batches = []
    for _ in range(max(1, n // BATCH)):
        t0 = clock()
        for _ in range(BATCH):
            launch(fn, 1, 1, 1, 32, 1, 1, 0, None, None, None)
        batches.append(clock() - t0)
    cuda.cuCtxSynchronize()
    return sum(batches) / (len(batches) * BATCH), min(batches) / BATCH, depth


def c_lib():
    """py_bench_loop.c, built now."""
    import os
    import subprocess
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    so = os.path.join(tempfile.mkdtemp(), "py_bench_loop.so")
    subprocess.check_call(["cc", "-O2", "-shared", "-fPIC", "-o", so, os.path.join(here, "py_bench_loop.c")])
    return ctypes.CDLL(so)


def paired_loop(fn, n):
    """The launches made from C in batch pairs, paused and recording (py_bench_loop.c's
    launch_loop_paired): (median added ns, median paused ns, median recording ns, pairs)."""
    pause = getattr(ctypes.CDLL(None), "cudablame_pause", None)
    if pause is None:
        sys.exit("py_bench.py: LOOP paired needs cudablame loaded (no cudablame_pause)")
    lib = c_lib()
    lib.launch_loop_paired.restype = ctypes.c_int
    lib.launch_loop_paired.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                       ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)]
    launch = ctypes.cast(cuda.cuLaunchKernel, ctypes.c_void_p)
    pause_ptr = ctypes.cast(pause, ctypes.c_void_p)
    out = (ctypes.c_double * 3)()
    lib.launch_loop_paired(launch, fn, BATCH * 10, BATCH, pause_ptr, out)  # warm up
    pairs = lib.launch_loop_paired(launch, fn, n, BATCH, pause_ptr, out)
    cuda.cuCtxSynchronize()
    return out[0], out[1], out[2], pairs


def c_loop(fn, n):
    """The launches made from C (py_bench_loop.c), as under one PyTorch op. With BENCH_PAUSED=1
    cudablame is paused first (the pass-through alone, to compare with no shim)."""
    import os

    if os.environ.get("BENCH_PAUSED") == "1":
        pause = getattr(ctypes.CDLL(None), "cudablame_pause", None)
        if pause is None:
            sys.exit("py_bench.py: BENCH_PAUSED=1 needs cudablame loaded (no cudablame_pause)")
        pause(1)
    lib = c_lib()
    lib.launch_loop.restype = ctypes.c_double
    lib.launch_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    launch = ctypes.cast(cuda.cuLaunchKernel, ctypes.c_void_p)
    depth = frames_here()
    lib.launch_loop(launch, fn, BATCH * 10, BATCH)  # warm up
    best = lib.launch_loop(launch, fn, n, BATCH)
    cuda.cuCtxSynchronize()
    return best, best, depth


def deeper(remaining, fn, n, body):
    if remaining <= 0:
        return body(fn, n)
    return deeper(remaining - 1, fn, n, body)


def main():
    depth, n = int(sys.argv[1]), int(sys.argv[2])
    fn = setup(sys.argv[3] if len(sys.argv) > 3 else "refused")
    mode = sys.argv[4] if len(sys.argv) > 4 else "python"
    loop(fn, 1000)  # warm up: first sight of every code object, driver queues
    if mode == "paired":
        # <module>, main, deeper (k + 1 frames for k), paired_loop: as deep as the other loops
        added, paused, recording, pairs = deeper(depth - 4, fn, n, paired_loop)
        print(f"paired_added_ns={added:.1f}")
        print(f"paused_ns={paused:.1f}")
        print(f"recording_ns={recording:.1f}")
        print(f"pairs={pairs}")
        return
    body = c_loop if mode == "c" else loop
    # <module>, main, deeper (k + 1 frames for k), the loop
    mean, best, frames = deeper(depth - 4, fn, n, body)
    print(f"launch_ns={mean:.1f}")
    print(f"best_batch_ns={best:.1f}")
    print(f"frames={frames}")


if __name__ == "__main__":
    main()
