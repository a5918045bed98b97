#!/bin/bash
# Goal 4's same-process verdict for several libraries or settings side by side, as a user runs
# them (no CUDABLAME_STATS: the hooks untimed): ROUNDS (5) rotating rounds of one process per run,
# `train_step.py --size $SIZES --paired 5 --paired-ms $PAIRED_MS` (recording vs paused blocks,
# ABBA; at least PAIRED_MS ms of pairs per size, 1500), each pinned to CPU 2.
# RUNS="label|library|ENV=value ...;..." (default: base and new in .gpu/); BUDGET_S: no round
# started after that many seconds. Prints each run's paired pct per size, then per label and size
# the median of the runs' medians with the second smallest and second largest (bench.sh's rule),
# and the paused ms (the host's speed); then, per round, each other label against the first
# (scripts/paired-diff.py: the host's drift between rounds cancels).
# Written in the sixteenth session (issue 21: the hot path's footprint).
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the libraries in .gpu/
# One folder per call: the summary reads every run file in it, and a later call on the same warm
# machine with fewer rounds left the earlier call's higher rounds in the shared /tmp/plogs, counted
# again. PLOGS names a folder to add this call's rounds to an earlier one's on purpose.
L=${PLOGS:-/tmp/plogs/$(date +%s)}; mkdir -p "$L"
ROUNDS=${ROUNDS:-5}
SIZES=${SIZES:-gpt,tiny}
RUNS=${RUNS:-"base|$PWD/.gpu/base.so|X=1;new|$PWD/.gpu/libcudablame.so|X=1"}
IFS=';' read -r -a runs <<<"$RUNS"
n=${#runs[@]}
t0=$(date +%s)
for ((r = 0; r < ROUNDS; r++)); do
  # BUDGET_S: start no round after that many seconds (a call has 600; a run killed by the call's
  # limit leaves no summary), so ROUNDS can ask for as many as might fit.
  if [ -n "${BUDGET_S:-}" ] && (( $(date +%s) - t0 > BUDGET_S )); then
    echo "paired: stopped after $r rounds (BUDGET_S=$BUDGET_S)"; break
  fi
  for ((k = 0; k < n; k++)); do
    run=${runs[$(((r + k) % n))]}
    [ -n "$run" ] || continue
    IFS='|' read -r label lib env <<<"$run"
    # shellcheck disable=SC2086
    out=$(timeout -k 5 150 taskset -c 2 env LD_PRELOAD=$lib CUDABLAME_REPORT=off $env \
      python3 cuda-samples/bench/train_step.py --size "$SIZES" --steps 20 --paired 5 \
      --paired-ms "${PAIRED_MS:-1500}" 2>&1)
    echo "$out" > "$L/$r-$label.txt"
    echo "r$r $label $(grep -oE '[a-z]+_(paired_pct|paused_ms)=[-0-9.]+' <<<"$out" | tr '\n' ' ')"
  done
done
echo "paired: $(( $(date +%s) - t0 )) s"
order() { sort -g | awk '{a[NR]=$1} END {n=NR; m=a[int((n+1)/2)]; lo=(n>=5)?a[2]:a[1]; hi=(n>=5)?a[n-1]:a[n]; printf "%s (%s..%s, n=%d)", m, lo, hi, n}'; }
for run in "${runs[@]}"; do
  label=${run%%|*}
  for s in ${SIZES//,/ }; do
    pct=$(cat $L/*-"$label".txt 2>/dev/null | grep -oE "${s}_paired_pct=[-0-9.]+" | cut -d= -f2 | order)
    ms=$(cat $L/*-"$label".txt 2>/dev/null | grep -oE "${s}_paused_ms=[-0-9.]+" | cut -d= -f2 | order)
    echo "$label $s: recording vs paused % $pct; paused ms $ms"
  done
done
# Per round, each other label against the first (scripts/paired-diff.py: median, sign-test
# interval, rounds lower); pool several calls' folders with it afterwards (plogs.tgz).
(( n > 1 )) && python3 scripts/paired-diff.py "$SIZES" "${runs[0]%%|*}" "$L"
tar czf "$OUT/plogs.tgz" -C "$(dirname "$L")" "$(basename "$L")"
