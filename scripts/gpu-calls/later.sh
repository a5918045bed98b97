#!/bin/bash
# Do progress markers slow the driver's later calls? (twenty-second session, issue 21: the
# launch loop's same-process cost, +0.567 us on an H100, was above its own time, and a library
# that wrote more markers had slower paused steps.) Per marker mode (off, the default budget,
# every): `launch_loop N paired` under CUDABLAME_STATS=total, whose stats line gives the real
# call's ns while paused and while recording in the same process, and cudablame's own ns; then
# `train_step.py --size tiny --paired 5` (paused and recording step ms). ROUNDS (3) rotating
# rounds of one process per mode, each pinned to CPU 2.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library in .gpu/
L=/tmp/later; mkdir -p $L
LIB=$PWD/.gpu/libcudablame.so BIN=/tmp/later/launch_loop
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O2 -arch=sm_90 -o $BIN cuda-samples/bench/launch_loop.cu -lcuda || exit 1
modes=(off budget every)
for ((r = 0; r < ${ROUNDS:-3}; r++)); do
  for ((k = 0; k < 3; k++)); do
    m=${modes[$(((r + k) % 3))]}
    o=$(timeout -k 5 60 taskset -c 2 env LD_PRELOAD=$LIB CUDABLAME_REPORT=off CUDABLAME_MARKERS=$m \
      CUDABLAME_STATS=total $BIN "${N:-30000}" paired 2>&1)
    echo "$o" > $L/loop-$r-$m.txt
    echo "loop r$r $m: $(grep -oE 'paired_added_us=[-0-9.]+|paused_us=[0-9.]+|recording_us=[0-9.]+' <<<"$o" | tr '\n' ' ')" \
      "$(grep -oE 'paused: [0-9]+ ops, real call [0-9]+ ns|first pause: [0-9]+ ops, real call [0-9]+ ns, cudablame [0-9]+ ns|marked [0-9]+ of [0-9]+' <<<"$o" | tr '\n' ' ')"
  done
done
for ((r = 0; r < ${TRAIN_ROUNDS:-2}; r++)); do
  for ((k = 0; k < 3; k++)); do
    m=${modes[$(((r + k) % 3))]}
    o=$(timeout -k 5 90 taskset -c 2 env LD_PRELOAD=$LIB CUDABLAME_REPORT=off CUDABLAME_MARKERS=$m \
      python3 cuda-samples/bench/train_step.py --size tiny --steps 20 --paired 5 --paired-ms 1500 2>&1)
    echo "$o" > $L/tiny-$r-$m.txt
    echo "tiny r$r $m: $(grep -oE 'tiny_(paired_pct|paused_ms|recording_ms)=[-0-9.]+' <<<"$o" | tr '\n' ' ')"
  done
done
tar czf "$OUT/later.tgz" -C /tmp later 2>/dev/null
