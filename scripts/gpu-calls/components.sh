#!/bin/bash
# What each part of recording costs a PyTorch step, measured in one process per run: for each
# configuration, train_step.py --size gpt (SIZE=tiny: the small step) --paired 5 (recording vs paused, ABBA) with
# CUDABLAME_STATS=on, in rotating rounds. LIBS="label=path ..." compares libraries too;
# RUNS="label|library|ENV=value ...;..." instead names each run of a round (no cross product).
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library in .gpu/
L=/tmp/clogs; mkdir -p $L
ROUNDS=${ROUNDS:-4}
LIBS=${LIBS:-"main=$PWD/.gpu/libcudablame.so"}
CFGS=${CFGS:-"default|X=1;markers_off|CUDABLAME_MARKERS=off;stack_off|CUDABLAME_STACK=off;python_off|CUDABLAME_PYTHON=off;all_off|CUDABLAME_MARKERS=off CUDABLAME_STACK=off CUDABLAME_PYTHON=off"}
IFS=';' read -r -a cfgs <<<"$CFGS"
read -r -a libs <<<"$LIBS"
if [ -z "${RUNS:-}" ]; then
  RUNS=""
  for lib in "${libs[@]}"; do
    for c in "${cfgs[@]}"; do RUNS+="${lib%%=*}/${c%%|*}|${lib#*=}|${c#*|};"; done
  done
fi
IFS=';' read -r -a runs <<<"$RUNS"
t0=$(date +%s)
for ((r = 0; r < ROUNDS; r++)); do
  for run in "${runs[@]}"; do
    [ -n "$run" ] || continue
    IFS='|' read -r label lib env <<<"$run"
    # shellcheck disable=SC2086
    out=$(timeout -k 5 120 taskset -c 2 env LD_PRELOAD=$lib CUDABLAME_REPORT=off CUDABLAME_STATS=on $env \
      python3 cuda-samples/bench/train_step.py --size ${SIZE:-gpt} --steps 20 --paired 5 2>&1)
    echo "$out" > "$L/${SIZE:-gpt}-$r-${label//\//-}.txt"
    echo "r$r $label $(grep -oE '(gpt|tiny)_(paired_pct|paused_ms|recording_ms)=[-0-9.]+' <<<"$out" | tr '\n' ' ')"
    grep -o 'cudablame stats:.*' <<<"$out" | sed -E 's/cudablame stats: //' | cut -c1-600
  done
done
echo "components: $(( $(date +%s) - t0 )) s"
tar czf $OUT/clogs.tgz -C /tmp clogs
