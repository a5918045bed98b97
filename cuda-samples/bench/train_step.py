"""train_step.py: ms per training step of a small GPT-style model (benchmark, not a test).

    python3 train_step.py [--size gpt|tiny] [--steps N]

gpt:  6 layers, d=512, 8 heads, bf16, batch 16x256, forward + backward + AdamW (GPU-bound).
tiny: 2 layers, d=64, batch 2x16: Python dispatch and launches dominate (host-bound).
Prints `step_ms=<median> launches_per_step=<n>`.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn

p = argparse.ArgumentParser()
p.add_argument("--size", default="gpt", choices=["gpt", "tiny"])
p.add_argument("--steps", type=int, default=30)
args = p.parse_args()

layers, d, batch, seq = (6, 512, 16, 256) if args.size == "gpt" else (2, 64, 2, 16)
vocab = 4096
dev = "cuda"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        mask = torch.triu(torch.ones(seq, seq, device=idx.device, dtype=torch.bool), 1)
        x = self.emb(idx) + self.pos
        for b in self.blocks:
            x = b(x, mask)
        return self.head(x)


model = GPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
data = torch.randint(0, vocab, (batch, seq + 1), device=dev)


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab).float(), data[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


for _ in range(5):
    step()
torch.cuda.synchronize()
times = []
for _ in range(args.steps):
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
with torch.autograd.profiler.profile(use_cuda=False) as prof:
    step()
    torch.cuda.synchronize()
launches = sum(1 for e in prof.function_events if e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx"))
print(f"step_ms={statistics.median(times):.3f} min={min(times):.3f} max={max(times):.3f} launches_per_step={launches}")
