#!/bin/bash
# The same-process comparison checked against itself: train_step.py --paired 5 recording vs
# paused (AB), both paused (AA, BENCH_PAIRED_AA=1) and recording with markers, stack and Python off,
# 3 rotating rounds (seventh session; docs/history.md, Performance).
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library in .gpu/
for r in 0 1 2; do
 for c in "AB|X=1" "AA|BENCH_PAIRED_AA=1" "AB_alloff|CUDABLAME_MARKERS=off CUDABLAME_STACK=off CUDABLAME_PYTHON=off"; do
  out=$(timeout -k 5 120 taskset -c 2 env LD_PRELOAD=$PWD/.gpu/libcudablame.so CUDABLAME_REPORT=off ${c#*|} python3 cuda-samples/bench/train_step.py --size gpt,tiny --steps 40 --paired 5 2>&1)
  echo "r$r ${c%%|*} $(grep -oE '(gpt|tiny)_(paired_pct|paired_lo|paired_hi|paused_ms|recording_ms)=[-0-9.]+' <<<"$out" | tr '\n' ' ')"
 done
done
