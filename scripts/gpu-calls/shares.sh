#!/bin/bash
# How much of each training step the GPU is busy (no shim, the host pinned to CPU 2 as in
# bench.sh): train_step.py --count prints `<size>_gpu_share` (the step's summed GPU activity over
# its median ms). gpt and tiny, then `big` at BENCH_BIG_BATCH 8, 16 and 32 (the batch that makes
# it GPU-bound on this host). The twelfth session's first call (docs/history.md, Performance).
set -u
cd "$(dirname "$0")/../.." || exit 2
t0=$(date +%s)
for s in gpt tiny; do
  timeout 120 taskset -c 2 python3 cuda-samples/bench/train_step.py --size $s --steps 10 --count 2>&1 |
    grep -E "_(step_ms|launches_per_step)="
done
for b in ${BATCHES:-8 16 32}; do
  echo "big batch $b: $(BENCH_BIG_BATCH=$b timeout 150 taskset -c 2 python3 cuda-samples/bench/train_step.py \
    --size big --steps 10 --count 2>&1 | grep -E "_(step_ms|launches_per_step)=" | tr '\n' ' ')"
done
echo "shares $(( $(date +%s)-t0 ))s"
