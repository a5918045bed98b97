"""cuda_graph.py: a correct (non-faulting) CUDA-graph training run for scripts/gpu-differential.sh.

Whole-network capture as documented for torch.cuda.CUDAGraph: an MLP's forward, backward and
optimizer step (SGD with momentum) are warmed up on a side stream, captured once with
torch.cuda.graph(g), then replayed 20 times, each replay fed a new batch by copying it into the
static input and target tensors. Proves that capture and replay compute the same under cudablame.
Deterministic: fixed seed, cuBLAS workspace config, torch.use_deterministic_algorithms(True).
Prints `RESULT cuda_graph <sha256>` over the final parameters and the 20 per-replay losses.
"""
import os

# Must be set before torch (cuBLAS) initializes: deterministic cuBLAS workspaces.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import ctypes  # noqa: E402
import hashlib  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

N, D_IN, H, D_OUT = 256, 128, 256, 64
WARMUP, REPLAYS = 3, 20


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
        nn.Linear(D_IN, H), nn.ReLU(),
        nn.Linear(H, H), nn.ReLU(),
        nn.Linear(H, D_OUT),
    ).to(dev)
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    # Placeholders the graph reads from, and the batches fed to the replays.
    static_input = torch.randn(N, D_IN, device=dev)
    static_target = torch.randn(N, D_OUT, device=dev)
    batches = [(torch.randn(N, D_IN, device=dev), torch.randn(N, D_OUT, device=dev))
               for _ in range(REPLAYS)]

    # Warm up on a side stream (creates the momentum buffers, loads the kernels).
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(WARMUP):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(static_input), static_target)
            loss.backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)

    # Capture forward, backward and step. Grads set to None first, so backward allocates them
    # from the graph's private pool.
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = loss_fn(model(static_input), static_target)
        static_loss.backward()
        opt.step()

    losses = []
    for x, y in batches:
        static_input.copy_(x)
        static_target.copy_(y)
        g.replay()
        losses.append(static_loss.detach().clone())
    losses = torch.stack(losses)
    torch.cuda.synchronize()

    print(f"replays {REPLAYS}, loss first {losses[0].item():.6f} last {losses[-1].item():.6f}")
    print(f"RESULT cuda_graph {digest([*model.parameters(), losses])}")


if __name__ == "__main__":
    main()
