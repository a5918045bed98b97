"""gpt_train.py: a correct (non-faulting) tiny transformer training run for scripts/gpu-differential.sh.

2 pre-LN blocks, d=128, 4 heads, causal F.scaled_dot_product_attention, bf16 autocast (fp32
parameters), vocab 512, batch 8x64, AdamW, 20 steps.
Deterministic: fixed seed, cuBLAS workspace config, torch.use_deterministic_algorithms(True)
(not warn_only: in warn_only mode PyTorch keeps the non-deterministic flash-attention backward).
SDPA is limited to the flash, memory-efficient and math backends (not cuDNN).
Prints `RESULT gpt_train <sha256>` over the final parameters and the 20 per-step losses.
"""
import os

# Must be set before torch (cuBLAS) initializes: deterministic cuBLAS workspaces.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import ctypes  # noqa: E402
import hashlib  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

VOCAB, D, HEADS, LAYERS = 512, 128, 4, 2
BATCH, SEQ, STEPS = 8, 64, 20


def digest(tensors):
    """sha256 over dtype, shape and raw bytes of each tensor (copied to the CPU), in order."""
    h = hashlib.sha256()
    for t in tensors:
        c = t.detach().cpu().contiguous()
        h.update(f"{c.dtype}{tuple(c.shape)};".encode())
        h.update(ctypes.string_at(c.data_ptr(), c.numel() * c.element_size()))
    return h.hexdigest()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (z.view(b, t, HEADS, D // HEADS).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, D))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(0.02 * torch.randn(SEQ, D))
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    dev = "cuda"

    model = TinyGPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    data = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device=dev)
    inputs, targets = data[:, :-1], data[:, 1:]

    losses = []
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        for _ in range(STEPS):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(inputs)
            loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), targets.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    losses = torch.stack(losses)
    torch.cuda.synchronize()

    print(f"steps {STEPS}, loss first {losses[0].item():.6f} last {losses[-1].item():.6f}")
    print(f"RESULT gpt_train {digest([*model.parameters(), losses])}")


if __name__ == "__main__":
    main()
