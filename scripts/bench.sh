#!/usr/bin/env bash
# Benchmark (GPU machine): host µs per empty-kernel launch, side by side in one run, for no shim,
# cudablame's configurations and CUDA_LAUNCH_BLOCKING=1. Prints a table: median and spread of
# REPS runs of N launches each. Usage: scripts/bench.sh [N] [REPS]
set -u
cd "$(dirname "$0")/.." || exit 2
N=${1:-200000}
REPS=${2:-5}
LIB=${CUDABLAME_LIB:-$PWD/.gpu/libcudablame.so}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
BIN=${BUILD_DIR:-/tmp/cudablame-bench}/launch_loop
mkdir -p "$(dirname "$BIN")"
"$NVCC" -O2 -arch=sm_90 -o "$BIN" cuda-samples/bench/launch_loop.cu || exit 1

configs=(
  "no shim|"
  "cudablame default (markers + native stack)|LD_PRELOAD=$LIB"
  "cudablame markers, no stack|LD_PRELOAD=$LIB CUDABLAME_STACK=off"
  "cudablame stack, no markers|LD_PRELOAD=$LIB CUDABLAME_MARKERS=off"
  "cudablame ring only|LD_PRELOAD=$LIB CUDABLAME_STACK=off CUDABLAME_MARKERS=off"
  "CUDA_LAUNCH_BLOCKING=1|CUDA_LAUNCH_BLOCKING=1"
)
printf '%-45s %10s %10s %10s\n' "config ($N launches x $REPS)" "median us" "min" "max"
for c in "${configs[@]}"; do
  name=${c%%|*}
  envs=${c#*|}
  vals=()
  for _ in $(seq "$REPS"); do
    v=$(env $envs CUDABLAME_REPORT=off "$BIN" "$N" | sed -n 's/^launch_us=\([0-9.]*\).*/\1/p')
    vals+=("${v:-nan}")
  done
  printf '%s\n' "${vals[@]}" | sort -g | awk -v name="$name" '{a[NR]=$1} END {printf "%-45s %10.3f %10.3f %10.3f\n", name, a[int((NR+1)/2)], a[1], a[NR]}'
done
