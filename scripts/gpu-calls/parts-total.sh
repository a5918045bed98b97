#!/bin/bash
# What each part of recording costs in CUDABLAME_STATS=total mode (no phase timing in the own
# time), and what the hot path's system and driver calls cost from a cold cache
# (cuda-samples/bench/ctxbench.c). The eleventh session's exploratory call (docs/history.md, Performance).
# ARC=path adds a second library as the run "arc".
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library in .gpu/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch; print(torch.__version__)'
gcc -O2 -o /tmp/ctxbench cuda-samples/bench/ctxbench.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda 2>&1 | tail -3
taskset -c 2 /tmp/ctxbench
T="CUDABLAME_STATS=total"
L=$PWD/.gpu/libcudablame.so
RUNS="default|$L|$T;markers_off|$L|$T CUDABLAME_MARKERS=off;stack_off|$L|$T CUDABLAME_STACK=off;python_off|$L|$T CUDABLAME_PYTHON=off;all_off|$L|$T CUDABLAME_MARKERS=off CUDABLAME_STACK=off CUDABLAME_PYTHON=off;window64|$L|$T CUDABLAME_MARKER_WINDOW=64"
[ -n "${ARC:-}" ] && RUNS+=";arc|$ARC|$T"
RUNS=$RUNS ROUNDS=${ROUNDS:-2} bash scripts/gpu-calls/components.sh
