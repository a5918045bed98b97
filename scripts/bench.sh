#!/usr/bin/env bash
# Benchmark (GPU machine; a benchmark, not a test). Side by side in one run, each several times
# (median, min, max):
#   1. launch loop, host-only: µs per empty-kernel launch while the stream is blocked (pure
#      enqueue cost), and back to back (can be GPU-throughput-bound);
#   2. PyTorch training step of a small GPT (GPU-bound) and a tiny one (host-bound), ms per step;
# for no shim, cudablame's configurations and CUDA_LAUNCH_BLOCKING=1.
# Usage: scripts/bench.sh [N_LAUNCHES] [REPS] [launch|train|all]
set -u
cd "$(dirname "$0")/.." || exit 2
N=${1:-200000}
REPS=${2:-5}
WHAT=${3:-all}
LIB=${CUDABLAME_LIB:-$PWD/.gpu/libcudablame.so}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
BIN=${BUILD_DIR:-/tmp/cudablame-bench}/launch_loop
mkdir -p "$(dirname "$BIN")"
"$NVCC" -O2 -arch=sm_90 -o "$BIN" cuda-samples/bench/launch_loop.cu || exit 1
S="LD_PRELOAD=$LIB CUDABLAME_REPORT=off"

# median/min/max of REPS runs of a command whose output has KEY=<number>
measure() {
  local name=$1 key=$2 envs=$3; shift 3
  local vals=()
  for _ in $(seq "$REPS"); do
    v=$(env $envs "$@" 2>/dev/null | sed -n "s/.*$key=\([0-9.]*\).*/\1/p" | head -1)
    vals+=("${v:-nan}")
  done
  printf '%s\n' "${vals[@]}" | sort -g | awk -v name="$name" '{a[NR]=$1} END {printf "%-52s %9.3f %9.3f %9.3f\n", name, a[int((NR+1)/2)], a[1], a[NR]}'
}

launch_configs=(
  "no shim|X=1"
  "cudablame default (markers + native stack)|$S"
  "cudablame markers only (CUDABLAME_STACK=off)|$S CUDABLAME_STACK=off"
  "cudablame stack only (CUDABLAME_MARKERS=off)|$S CUDABLAME_MARKERS=off"
  "cudablame stack only, libgcc unwinder|$S CUDABLAME_MARKERS=off CUDABLAME_UNWINDER=libgcc"
  "cudablame ring only (markers and stack off)|$S CUDABLAME_STACK=off CUDABLAME_MARKERS=off"
  "cudablame default, CUDABLAME_STACK_DEPTH=8|$S CUDABLAME_STACK_DEPTH=8"
  "CUDA_LAUNCH_BLOCKING=1|CUDA_LAUNCH_BLOCKING=1"
)
if [ "$WHAT" != train ]; then
  for mode in host stream; do
    printf '\n%-52s %9s %9s %9s\n' "launch loop, $mode mode, $N launches x $REPS" "median us" "min" "max"
    for c in "${launch_configs[@]}"; do
      measure "${c%%|*}" launch_us "${c#*|}" "$BIN" "$N" "$mode"
    done
  done
fi
if [ "$WHAT" != launch ]; then
  for size in gpt tiny; do
    printf '\n%-52s %9s %9s %9s\n' "training step ($size), $REPS runs of 30 steps" "median ms" "min" "max"
    for c in "no shim|X=1" "cudablame default|$S" "cudablame CUDABLAME_STACK=off|$S CUDABLAME_STACK=off" \
      "CUDA_LAUNCH_BLOCKING=1|CUDA_LAUNCH_BLOCKING=1"; do
      measure "${c%%|*}" step_ms "${c#*|}" python3 cuda-samples/bench/train_step.py --size "$size"
    done
    python3 cuda-samples/bench/train_step.py --size "$size" --steps 3 | sed 's/.*launches_per_step=/launches per step: /' 
  done
fi
