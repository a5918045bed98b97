#!/bin/bash
# The marker gap's share of the GPT step's own time: CUDABLAME_STATS, default (500 us) vs 1000 us,
# interleaved, pinned to CPU 2 like bench.sh.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library and the command in .gpu/
LIB=$PWD/.gpu/libcudablame.so
for r in 1 2 3 4; do
  for g in 500 1000; do
    o=$(taskset -c 2 env LD_PRELOAD=$LIB CUDABLAME_STATS=on CUDABLAME_MARKER_GAP_US=$g python3 cuda-samples/bench/train_step.py --size gpt --steps 20 --paired 5 2>&1)
    echo "round $r gap $g: $(grep -oE 'gpt_step_ms=[0-9.]+|gpt_paired_pct=[0-9.-]+|gpt_paused_ms=[0-9.]+|gpt_recording_ms=[0-9.]+' <<<"$o" | tr '\n' ' ') $(grep -o 'cudablame stats:.*' <<<"$o" | sed -E 's/.*cudablame ([0-9]+) \(native stack copy ([0-9]+).*python ([0-9]+).*marker ([0-9]+), of which ([0-9]+) in ([0-9]+) writes.*marked ([0-9]+) of [0-9]+ ops \((.*)\); held.*/own \1 copy \2 py \3 marker \4 (long \5 in \6) marked \7 (\8)/')"
  done
done
