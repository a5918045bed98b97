#!/usr/bin/env bash
# torchrun-example.sh: a multi-process PyTorch job under cudablame, then which rank failed first.
#
#   scripts/torchrun-example.sh                                   # built-in 2-rank faulty job
#   scripts/torchrun-example.sh --nproc-per-node 8 train.py --lr 1e-3   # your job (torchrun args)
#
# cudablame wraps torchrun itself: `cudablame run --report 'cudablame-%h-r%r.json' -- torchrun ...`.
# torchrun's worker processes (and their DataLoader workers) inherit LD_PRELOAD and the CUDABLAME_*
# variables through the environment, and each writes its report under its own RANK. Then
# `cudablame summary` prints one line per rank and names the first failure.
#
# The built-in job (needs PyTorch and a GPU): rank 1 indexes out of bounds on the GPU (a
# device-side assert, reported later at .item()); rank 0 waits for rank 1 in a collective and is
# stopped by torchrun when rank 1 dies, so it has no CUDA error of its own.
#
# Environment:
#   CUDABLAME  the cudablame command (default: target/release/cudablame of this checkout)
#   REPORTS    where the reports go (default: ./cudablame-reports-DATE-TIME)
#   TORCHRUN   the torchrun command (default: torchrun, else python3 -m torch.distributed.run)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CUDABLAME=${CUDABLAME:-$root/target/release/cudablame}
REPORTS=${REPORTS:-$PWD/cudablame-reports-$(date +%Y%m%d-%H%M%S)}
if [ ! -x "$CUDABLAME" ]; then
    echo "cudablame not found at $CUDABLAME: build it (cargo build --release) or set CUDABLAME" >&2
    exit 2
fi
if [ -n "${TORCHRUN:-}" ]; then
    read -r -a torchrun <<<"$TORCHRUN"
elif command -v torchrun >/dev/null; then
    torchrun=(torchrun)
else
    torchrun=(python3 -m torch.distributed.run)
fi
mkdir -p "$REPORTS"

if [ $# -eq 0 ]; then
    job=$(mktemp -d)/faulty_job.py
    cat >"$job" <<'PY'
import os
import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local = int(os.environ.get("LOCAL_RANK", rank))
# One GPU per rank when there are enough (NCCL); else all ranks share the GPUs and talk over gloo.
enough = torch.cuda.device_count() >= world
dist.init_process_group("nccl" if enough else "gloo")
device = torch.device("cuda", local % torch.cuda.device_count())
torch.cuda.set_device(device)


def gather_rows(x, idx):
    return x[idx]


x = torch.arange(1024, dtype=torch.float32, device=device)
for step in range(3):
    x = x * 1.0001
if rank == 1:
    idx = torch.tensor([0, 5, 1024], device=device)  # BUG: valid indices are 0..1023
    y = gather_rows(x, idx)
    print(f"rank {rank}: sum = {(y * 2).sum().item()}")  # the device-side assert surfaces here
total = torch.ones(1, device=device if enough else "cpu")
dist.all_reduce(total)  # rank 0 waits here for rank 1, which died
print(f"rank {rank}: all_reduce gave {total.item()}")
dist.destroy_process_group()
PY
    set -- --standalone --nproc-per-node 2 "$job"
fi

"$CUDABLAME" run --report "$REPORTS/cudablame-%h-r%r.json" -- "${torchrun[@]}" "$@"
status=$?

echo "== torchrun exited with status $status; cudablame reports in $REPORTS"
"$CUDABLAME" summary "$REPORTS" || echo "(no rank reported a CUDA error)"
exit $status
