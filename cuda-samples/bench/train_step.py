"""train_step.py: ms per training step of a small GPT-style model (benchmark, not a test).

    python3 train_step.py [--size gpt|tiny|graph|big|gpt,tiny,graph,big] [--steps N] [--warmup N]
                          [--count] [--paired K [--paired-ms MS]]

gpt:   6 layers, d=512, 8 heads, bf16, batch 16x256, forward + backward + AdamW. On the H200
       with the host pinned to one CPU its kernels keep the GPU busy for less than half the step
       (--count prints the share): the launching thread bounds it, not the GPU.
tiny:  2 layers, d=64, batch 2x16: Python dispatch and launches dominate (host-bound).
big:   GPT-2 small's shape (12 layers, d=768, 12 heads, sequence 512), batch 32 (BENCH_BIG_BATCH
       overrides): enough work per kernel that the GPU bounds the step (GPU-bound).
graph: the gpt step captured whole into one CUDA graph (AdamW capturable), timed per replay
       (one graph launch per step: what cudablame adds is its cost per replay).
Several sizes run one after the other in one process (one interpreter start for all). Prints one
line per size, `<size>_step_ms=<median> <size>_min_ms=<x> <size>_max_ms=<x>`, flushed at once;
with --count (or BENCH_COUNT_LAUNCHES=1 in the environment) one more step is profiled afterwards
(CPU + CUDA activities) and `<size>_launches_per_step=<n> <size>_gpu_busy_ms=<x>
<size>_gpu_share=<x>` follows on its own line: the launches, the summed duration of the step's
GPU activities (kernels, copies, memsets; one stream, so they do not overlap) and that sum over
the step's median ms: near 1 the GPU bounds the step, well under 1 the host does (bench.sh
judges each eager size by it).

--paired K (under cudablame; scripts/bench.sh train): after those steps, the same process
compares cudablame recording with cudablame paused (`cudablame_pause`, found with
ctypes.CDLL(None); without the shim there is no switch and nothing more is run or printed), so
the host's speed, which on a shared machine changes by up to 2x from one process to the next,
is the same on both sides. Steps run in blocks of K, paused (A) and recording (B) in ABBA order
(pair i is AB for even i, BA for odd: a linear drift cancels), ceil(steps / K) blocks per state,
or with --paired-ms MS as many pairs as fill about MS ms at the timed steps' median (at most 200;
more pairs narrow each run's median, which bench.sh's verdict takes over runs);
the GPU is synchronized at each block's edges and not inside (a block's time / K is its ms per
step: the host may run ahead within a block, as in a training loop). One line per size:
`<size>_paired_pct=<median over pairs of 100 * (recording / paused - 1)> <size>_paired_lo=<x>
<size>_paired_hi=<x> <size>_paired_n=<pairs> <size>_paused_ms=<median> <size>_recording_ms=<median>`
(lo and hi: the second smallest and second largest pair of 5 or more, else the smallest and
largest: the median's distribution-free interval, as in bench.sh; a positive number has no `+`,
which bench.sh's parser would not read). What it leaves out: the cost of the pass-through itself
(the exported wrappers and one relaxed load per call, paid on both sides): bench.sh's launch
table has it (its row "cudablame paused").
BENCH_PAIRED_AA=1 in the environment keeps both sides paused: a check of the comparison itself
(its pct should be 0 within the noise; scripts/gpu-calls/aa.sh).
"""
import argparse
import ctypes
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--size", default="gpt", help="gpt, tiny, or a comma-separated list")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--count", action="store_true", help="count kernel launches of one step (profiler)")
p.add_argument(
    "--paired",
    type=int,
    default=0,
    metavar="K",
    help="also compare recording with paused cudablame in one process, blocks of K steps (0: no)",
)
p.add_argument(
    "--paired-ms",
    type=float,
    default=0,
    metavar="MS",
    help="with --paired: at least this many ms of block pairs (from the timed steps' median; "
    "at most 200 pairs); 0: ceil(steps / K) pairs",
)
args = p.parse_args()
count = args.count or os.environ.get("BENCH_COUNT_LAUNCHES") == "1"


def pause_switch():
    """cudablame's `int cudablame_pause(int paused)` (returns the previous state), or None."""
    try:
        f = getattr(ctypes.CDLL(None), "cudablame_pause", None)
    except OSError:
        return None
    if f is not None:
        f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
    return f


PAUSE = pause_switch() if args.paired > 0 else None
BIG_BATCH = int(os.environ.get("BENCH_BIG_BATCH", "32"))
SIZES = {
    "gpt": (6, 512, 16, 256),
    "tiny": (2, 64, 2, 16),
    "graph": (6, 512, 16, 256),
    "big": (12, 768, BIG_BATCH, 512),
}
VOCAB = 4096
DEV = "cuda"


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, max(8, d // 64), batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, d, seq):
        super().__init__()
        self.seq = seq
        self.emb = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.head = nn.Linear(d, VOCAB)

    def forward(self, idx):
        mask = torch.triu(torch.ones(self.seq, self.seq, device=idx.device, dtype=torch.bool), 1)
        x = self.emb(idx) + self.pos
        for b in self.blocks:
            x = b(x, mask)
        return self.head(x)


def count_launches(step):
    """(launches, ms of GPU activity) of one profiled step."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    names = ("cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch", "cuGraphLaunch")
    events = prof.events()
    launches = sum(1 for e in events if e.name.startswith(names))
    gpu_us = sum(e.time_range.elapsed_us() for e in events if e.device_type == DeviceType.CUDA)
    return launches, gpu_us / 1e3


def interval(values):
    """(median, lo, hi): lo and hi the second smallest and second largest of 5 or more values,
    else the smallest and largest (bench.sh's order_stats)."""
    v = sorted(values)
    k = 1 if len(v) >= 5 else 0
    return statistics.median(v), v[k], v[-1 - k]


def pairs_for(steps, k, paired_ms, step_ms):
    """Block pairs of one --paired comparison: ceil(steps / k), or more where `paired_ms` of
    pairs (2 k steps of `step_ms` each) need more, at most 200."""
    pairs = -(-steps // k)
    if paired_ms > 0 and step_ms > 0:
        pairs = max(pairs, min(200, math.ceil(paired_ms / (2 * k * step_ms))))
    return pairs


def paired(size, step, k, step_ms):
    """Blocks of k steps, paused (A) and recording (B) in ABBA order; prints the paired line."""

    # BENCH_PAIRED_AA=1: both sides paused, a check of the comparison itself (its pct should be 0).
    aa = os.environ.get("BENCH_PAIRED_AA") == "1"

    def block(paused):
        PAUSE(1 if paused or aa else 0)
        torch.cuda.synchronize()  # the previous block's work is done before the clock starts
        t0 = time.perf_counter()
        for _ in range(k):
            step()
        torch.cuda.synchronize()  # and this block's work is timed in this block
        return (time.perf_counter() - t0) * 1e3 / k

    pairs = pairs_for(args.steps, k, args.paired_ms, step_ms)
    ratios, paused_ms, recording_ms = [], [], []
    before = PAUSE(0)
    try:
        for i in range(pairs):
            if i % 2 == 0:
                a = block(True)
                b = block(False)
            else:
                b = block(False)
                a = block(True)
            paused_ms.append(a)
            recording_ms.append(b)
            ratios.append(100 * (b / a - 1))
    finally:
        PAUSE(before)
    pct, lo, hi = interval(ratios)
    print(
        f"{size}_paired_pct={pct:.3f} {size}_paired_lo={lo:.3f} {size}_paired_hi={hi:.3f} "
        f"{size}_paired_n={len(ratios)} {size}_paused_ms={statistics.median(paused_ms):.3f} "
        f"{size}_recording_ms={statistics.median(recording_ms):.3f}",
        flush=True,
    )


def bench(size):
    layers, d, batch, seq = SIZES[size]
    graphed = size == "graph"
    model = GPT(layers, d, seq).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=graphed)
    data = torch.randint(0, VOCAB, (batch, seq + 1), device=DEV)

    def step():
        # No autocast weight cache inside a graph capture (PyTorch's CUDA graphs notes).
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=not graphed):
            logits = model(data[:, :-1])
            loss = nn.functional.cross_entropy(
                logits.reshape(-1, VOCAB).float(), data[:, 1:].reshape(-1)
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if graphed:
        # PyTorch's "whole network capture": warm up on a side stream, capture one step with
        # the gradients unset (backward then writes them from the graph's pool), replay it.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                logits = model(data[:, :-1])
                loss = nn.functional.cross_entropy(
                    logits.reshape(-1, VOCAB).float(), data[:, 1:].reshape(-1)
                )
            loss.backward()
            opt.step()
        step = graph.replay  # noqa: F811  (each timed step is one replay)
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    print(
        f"{size}_step_ms={statistics.median(times):.3f} {size}_min_ms={min(times):.3f} "
        f"{size}_max_ms={max(times):.3f}",
        flush=True,
    )
    if PAUSE is not None:
        paired(size, step, args.paired, statistics.median(times))
    if count:
        launches, busy = count_launches(step)
        print(
            f"{size}_launches_per_step={launches} {size}_gpu_busy_ms={busy:.3f} "
            f"{size}_gpu_share={busy / statistics.median(times):.3f}",
            flush=True,
        )
    del model, opt, data
    torch.cuda.empty_cache()


for size in args.size.split(","):
    if size not in SIZES:
        sys.exit(f"train_step.py: unknown size {size!r} (gpt, tiny, graph, big)")
    bench(size)
