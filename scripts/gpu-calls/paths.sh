#!/bin/bash
# A site per native path (twenty-second session, issue 21): .gpu/head.so (a launch whose key's
# site was made by another native path copied its own stack every time) against
# .gpu/libcudablame.so. In rotating rounds of one process per library, each pinned to CPU 2 (CPU):
# `launch_loop N paired` under CUDABLAME_STATS=total (its two call sites of one launch line are
# such paths: half its recording launches copied 8 KiB before), LOOP_ROUNDS (5); the GPT step's
# steady own time (CUDABLAME_STATS=total, `train_step.py --paired 5`), GPT_ROUNDS (3); the tiny
# step's same-process overhead (`--paired 5 --paired-ms 1500`, untimed hooks), TINY_ROUNDS (3).
# No part starts after BUDGET_S (300) seconds.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the libraries in .gpu/
L=/tmp/paths; mkdir -p $L
BIN=$L/launch_loop libs=("head|$PWD/.gpu/head.so" "new|$PWD/.gpu/libcudablame.so")
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O2 -arch=sm_90 -o $BIN cuda-samples/bench/launch_loop.cu -lcuda || exit 1
t0=$(date +%s)
late() { (( $(date +%s) - t0 > ${BUDGET_S:-300} )) && echo "paths: stopped at $1 (BUDGET_S)"; }
stat() { grep -oE "$1" <<<"$2" | tr '\n' ' '; }
for ((r = 0; r < ${LOOP_ROUNDS:-5}; r++)); do
  late "loop round $r" && break
  for ((k = 0; k < 2; k++)); do
    IFS='|' read -r label lib <<<"${libs[$(((r + k) % 2))]}"
    o=$(timeout -k 5 60 taskset -c "${CPU:-2}" env LD_PRELOAD=$lib CUDABLAME_REPORT=off CUDABLAME_STATS=total \
      $BIN "${N:-30000}" paired 2>&1)
    echo "$o" > $L/loop-$r-$label.txt
    echo "loop r$r $label: $(stat 'paired_added_us=[-0-9.]+|paused_us=[0-9.]+|recording_us=[0-9.]+' "$o")" \
      "$(stat 'first pause: [0-9]+ ops, real call [0-9]+ ns, cudablame [0-9]+ ns|launch sites [0-9]+ \([0-9]+ launches by another native path' "$o")"
  done
done
for ((r = 0; r < ${GPT_ROUNDS:-3}; r++)); do
  late "gpt round $r" && break
  for ((k = 0; k < 2; k++)); do
    IFS='|' read -r label lib <<<"${libs[$(((r + k) % 2))]}"
    o=$(timeout -k 5 90 taskset -c "${CPU:-2}" env LD_PRELOAD=$lib CUDABLAME_REPORT=off CUDABLAME_STATS=total \
      python3 cuda-samples/bench/train_step.py --size gpt --steps 20 --paired 5 2>&1)
    echo "$o" > $L/gpt-$r-$label.txt
    echo "gpt r$r $label: $(stat 'first pause: [0-9]+ ops, real call [0-9]+ ns, cudablame [0-9]+ ns|launch sites [0-9]+ \([0-9]+ launches by another native path|gpt_paired_pct=[-0-9.]+' "$o")"
  done
done
for ((r = 0; r < ${TINY_ROUNDS:-3}; r++)); do
  late "tiny round $r" && break
  for ((k = 0; k < 2; k++)); do
    IFS='|' read -r label lib <<<"${libs[$(((r + k) % 2))]}"
    o=$(timeout -k 5 90 taskset -c "${CPU:-2}" env LD_PRELOAD=$lib CUDABLAME_REPORT=off \
      python3 cuda-samples/bench/train_step.py --size tiny --steps 20 --paired 5 --paired-ms 1500 2>&1)
    echo "$o" > $L/tiny-$r-$label.txt
    echo "tiny r$r $label: $(stat 'tiny_(paired_pct|paused_ms|recording_ms)=[-0-9.]+' "$o")"
  done
done
echo "paths: $(( $(date +%s) - t0 )) s"
tar czf "$OUT/paths.tgz" -C /tmp paths 2>/dev/null
