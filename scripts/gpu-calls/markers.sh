#!/bin/bash
# Marker gap and window against the steady own time (CUDABLAME_STATS after the first pause):
# BASE (a library to compare with, default .gpu/base.so) and .gpu/libcudablame.so by default,
# with a 1000 us gap, a 64-op window and both; GPT and tiny steps, 3 interleaved rounds each.
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the libraries in .gpu/
M=$PWD/.gpu/libcudablame.so B=${BASE:-$PWD/.gpu/base.so}
export RUNS="base|$B|X=1;main|$M|X=1;gap1000|$M|CUDABLAME_MARKER_GAP_US=1000;window64|$M|CUDABLAME_MARKER_WINDOW=64;both|$M|CUDABLAME_MARKER_GAP_US=1000 CUDABLAME_MARKER_WINDOW=64"
ROUNDS=3 bash scripts/gpu-calls/components.sh 2>&1 | grep -v "^[0-9]* recorded"
SIZE=tiny ROUNDS=3 bash scripts/gpu-calls/components.sh 2>&1 | grep -v "^[0-9]* recorded"
