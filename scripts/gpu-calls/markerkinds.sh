#!/bin/bash
# Marker kinds (twenty-fourth session, issue 21): what a progress marker costs the launching
# thread and the GPU by the way it is written (cuda-samples/bench/marker_kinds.cu: the stream
# write of today, a one-thread kernel, a memset, a plain event), then the GPT step's own time
# with the default markers, a 64-op window and no markers, in rotating rounds of one process
# each (GPT_ROUNDS, 5), pinned to CPU 2. Logs in $OUT when set.
set -u
cd "$(dirname "$0")/../.." || exit 2
L=${OUT:-/tmp/markerkinds}; mkdir -p "$L"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -O2 -arch=sm_90 -o /tmp/marker_kinds cuda-samples/bench/marker_kinds.cu -lcuda || exit 1
timeout -k 5 150 taskset -c "${CPU:-2}" /tmp/marker_kinds "${ROUNDS:-7}" 2>&1 | tee "$L/marker_kinds.txt"
confs=("default|" "window64|CUDABLAME_MARKER_WINDOW=64" "off|CUDABLAME_MARKERS=off")
for ((r = 0; r < ${GPT_ROUNDS:-5}; r++)); do
  for ((k = 0; k < 3; k++)); do
    IFS='|' read -r label envs <<<"${confs[$(((r + k) % 3))]}"
    # shellcheck disable=SC2086
    o=$(timeout -k 5 90 taskset -c "${CPU:-2}" env LD_PRELOAD=$PWD/.gpu/libcudablame.so CUDABLAME_REPORT=off \
      CUDABLAME_STATS=total $envs python3 cuda-samples/bench/train_step.py --size gpt --steps 20 --paired 5 2>&1)
    echo "$o" >> "$L/gpt-$label.txt"
    echo "gpt r$r $label: $(grep -oE 'first pause: [0-9]+ ops, real call [0-9]+ ns, cudablame [0-9]+ ns|gpt_paired_pct=[-0-9.]+|marked [0-9]+[^;,]*' <<<"$o" | tr '\n' ' ')"
  done
done
