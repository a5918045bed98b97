#!/bin/bash
# Does a progress marker's host cost grow with the launches since the stream's last marker?
# (twenty-second session, issue 21: on an H100 host the GPT step's markers took about 10 us of
# the launching thread each, most of them after 32 unmarked launches, where the launch loop's
# took about 3 and a marker after every launch about 1.7.) The GPT step (`train_step.py --size
# gpt --paired 5`, CUDABLAME_STATS=on: the steady ops' marker ns per op, the markers) with the
# window CUDABLAME_MARKER_WINDOW at each of WINDOWS (8 32 128), ROUNDS (1) rotating rounds, one
# process each pinned to CPU 2 (CPU). Per-marker cost = marker ns per op x steady ops / steady markers.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library in .gpu/
L=/tmp/window; mkdir -p $L
LIB=$PWD/.gpu/libcudablame.so
read -r -a ws <<<"${WINDOWS:-8 32 128}"
for ((r = 0; r < ${ROUNDS:-1}; r++)); do
  for ((k = 0; k < ${#ws[@]}; k++)); do
    w=${ws[$(((r + k) % ${#ws[@]}))]}
    o=$(timeout -k 5 90 taskset -c "${CPU:-2}" env LD_PRELOAD=$LIB CUDABLAME_REPORT=off CUDABLAME_STATS=on \
      CUDABLAME_MARKER_WINDOW=$w python3 cuda-samples/bench/train_step.py --size gpt --steps 20 --paired 5 2>&1)
    echo "$o" > $L/gpt-$r-w$w.txt
    echo "window $w r$r: $(grep -oE 'first pause: [0-9]+ ops, real call [0-9]+ ns, cudablame [0-9]+ ns \([^)]*\), marked [0-9]+|marker [0-9]+, of which [0-9]+ in [0-9]+ writes' <<<"$o" | tr '\n' ' ')"
  done
done
tar czf "$OUT/window.tgz" -C /tmp window 2>/dev/null
