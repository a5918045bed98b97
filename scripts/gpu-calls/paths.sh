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
SITES='first pause: [0-9]+ ops, real call [0-9]+ ns, cudablame [0-9]+ ns|launch sites [0-9]+ \([0-9]+ launches by another native path'
# part NAME ROUNDS SECONDS PATTERN ENV -- COMMAND...: ROUNDS rotating rounds of one process per
# library, each pinned to CPU and limited to SECONDS, its output in $L/NAME-R-LABEL.txt and the
# matches of PATTERN printed; no round starts after BUDGET_S.
part() {
  local name=$1 rounds=$2 secs=$3 pattern=$4 envs=$5 r k label lib o
  shift 6
  for ((r = 0; r < rounds; r++)); do
    if (( $(date +%s) - t0 > ${BUDGET_S:-300} )); then
      echo "paths: stopped at $name round $r (BUDGET_S)"; return
    fi
    for ((k = 0; k < 2; k++)); do
      IFS='|' read -r label lib <<<"${libs[$(((r + k) % 2))]}"
      # shellcheck disable=SC2086
      o=$(timeout -k 5 "$secs" taskset -c "${CPU:-2}" env LD_PRELOAD=$lib CUDABLAME_REPORT=off $envs "$@" 2>&1)
      echo "$o" > "$L/$name-$r-$label.txt"
      echo "$name r$r $label: $(grep -oE "$pattern" <<<"$o" | tr '\n' ' ')"
    done
  done
}
part loop "${LOOP_ROUNDS:-5}" 60 "paired_added_us=[-0-9.]+|paused_us=[0-9.]+|recording_us=[0-9.]+|$SITES" \
  CUDABLAME_STATS=total -- "$BIN" "${N:-30000}" paired
part gpt "${GPT_ROUNDS:-3}" 90 "$SITES|gpt_paired_pct=[-0-9.]+" CUDABLAME_STATS=total -- \
  python3 cuda-samples/bench/train_step.py --size gpt --steps 20 --paired 5
part tiny "${TINY_ROUNDS:-3}" 90 'tiny_(paired_pct|paused_ms|recording_ms)=[-0-9.]+' X=1 -- \
  python3 cuda-samples/bench/train_step.py --size tiny --steps 20 --paired 5 --paired-ms 1500
echo "paths: $(( $(date +%s) - t0 )) s"
tar czf "$OUT/paths.tgz" -C /tmp paths 2>/dev/null
