"""mlp_train.py: a correct (non-faulting) MLP training run for scripts/gpu-differential.sh.

fp32 MLP (64 -> 256 -> 256 -> 10), full batch of 512, AdamW, 50 steps, MSE loss.
Deterministic: fixed seed, cuBLAS workspace config, torch.use_deterministic_algorithms(True).
Prints `RESULT mlp_train <sha256>` over the final parameters and the 50 per-step losses.
"""
import os

# Must be set before torch (cuBLAS) initializes: deterministic cuBLAS workspaces.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import ctypes  # noqa: E402
import hashlib  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

STEPS = 50


def digest(tensors):
    """sha256 over dtype, shape and raw bytes of each tensor (copied to the CPU), in order."""
    h = hashlib.sha256()
    for t in tensors:
        c = t.detach().cpu().contiguous()
        h.update(f"{c.dtype}{tuple(c.shape)};".encode())
        h.update(ctypes.string_at(c.data_ptr(), c.numel() * c.element_size()))
    return h.hexdigest()


def main():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    dev = "cuda"

    model = nn.Sequential(
        nn.Linear(64, 256), nn.GELU(),
        nn.Linear(256, 256), nn.GELU(),
        nn.Linear(256, 10),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

    x = torch.randn(512, 64, device=dev)
    true_w = torch.randn(64, 10, device=dev)
    y = torch.sin(x @ true_w)

    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    losses = torch.stack(losses)
    torch.cuda.synchronize()

    print(f"steps {STEPS}, loss first {losses[0].item():.6f} last {losses[-1].item():.6f}")
    print(f"RESULT mlp_train {digest([*model.parameters(), losses])}")


if __name__ == "__main__":
    main()
