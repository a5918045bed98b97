#!/bin/bash
# What the stack copy and the rest cost the program: the tiny step (host-bound) with the default
# copy (3 KiB under Python), 8 KiB, none, and markers, stack and Python all off,
# CUDABLAME_STATS=total, ROUNDS (7) interleaved rounds: per configuration its recording / paused
# step percentages, and per run the own ns per op, the real call, and the paused -> recording
# change of the whole hook and of the launching thread's time between two hooks (README
# Performance, thirteenth session: call 1 ran default, nostack, alloff and CUDABLAME_PYTHON=off).
set -u
cd "$(dirname "$0")/../.." || exit 2
T=CUDABLAME_STATS=total L=$PWD/.gpu/libcudablame.so
RUNS="default|$L|$T;c8192|$L|$T CUDABLAME_STACK_BYTES=8192;nostack|$L|$T CUDABLAME_STACK=off;alloff|$L|$T CUDABLAME_STACK=off CUDABLAME_PYTHON=off CUDABLAME_MARKERS=off" \
  SIZE=${SIZE:-tiny} ROUNDS=${ROUNDS:-7} timeout "${PART_TIMEOUT:-560}" bash scripts/gpu-calls/components.sh > $OUT/footprint.log 2>&1
tar czf $OUT/clogs-footprint.tgz -C /tmp clogs
re="s/.*paused: [0-9]+ ops, real call ([0-9]+) ns, whole hook ([0-9]+) ns; recorded after the first pause: [0-9]+ ops, real call ([0-9]+) ns, cudablame ([0-9]+) ns.*whole hook ([0-9]+) ns; between ops' hooks: paused ([0-9]+) ns \([0-9]+ gaps\), recording ([0-9]+) ns.*/\4 \3 \2 \5 \6 \7/p"
for c in default c8192 nostack alloff; do
  echo "$c recording / paused %: $(grep -E "^r[0-9] $c " $OUT/footprint.log | grep -oE '_paired_pct=[-0-9.]+' | cut -d= -f2 | tr '\n' ' ')"
  for f in /tmp/clogs/${SIZE:-tiny}-*-$c.txt; do
    grep -o 'cudablame stats:.*' "$f" | sed -nE "$re" |
      awk '{printf "  own %d real %d whole hook +%d between +%d\n", $1, $2, $4 - $3, $6 - $5}'
  done
done
