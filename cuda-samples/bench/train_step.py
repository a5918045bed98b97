"""train_step.py: ms per training step of a small GPT-style model (benchmark, not a test).

    python3 train_step.py [--size gpt|tiny|graph|gpt,tiny,graph] [--steps N] [--warmup N] [--count]

gpt:   6 layers, d=512, 8 heads, bf16, batch 16x256, forward + backward + AdamW (GPU-bound).
tiny:  2 layers, d=64, batch 2x16: Python dispatch and launches dominate (host-bound).
graph: the gpt step captured whole into one CUDA graph (AdamW capturable), timed per replay
       (one graph launch per step: what cudablame adds is its cost per replay).
Several sizes run one after the other in one process (one interpreter start for all). Prints one
line per size, `<size>_step_ms=<median> <size>_min_ms=<x> <size>_max_ms=<x>`, flushed at once;
with --count (or BENCH_COUNT_LAUNCHES=1 in the environment) one more step is profiled afterwards
(CPU + CUDA activities) and `<size>_launches_per_step=<n>` follows on its own line.
"""
import argparse
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
args = p.parse_args()
count = args.count or os.environ.get("BENCH_COUNT_LAUNCHES") == "1"
SIZES = {"gpt": (6, 512, 16, 256), "tiny": (2, 64, 2, 16), "graph": (6, 512, 16, 256)}
VOCAB = 4096
DEV = "cuda"


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
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
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    names = ("cudaLaunchKernel", "cuLaunchKernel", "cudaGraphLaunch", "cuGraphLaunch")
    return sum(1 for e in prof.events() if e.name.startswith(names))


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
    if count:
        print(f"{size}_launches_per_step={count_launches(step)}", flush=True)
    del model, opt, data
    torch.cuda.empty_cache()


for size in args.size.split(","):
    if size not in SIZES:
        sys.exit(f"train_step.py: unknown size {size!r} (gpt, tiny, graph)")
    bench(size)
