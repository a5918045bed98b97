#!/bin/bash
# One call for a new hot path (sixteenth session, issue 21): the versions; goal 4's same-process
# comparison, the library before (.gpu/base.so) and the new one (.gpu/libcudablame.so) side by
# side (paired.sh, ROUNDS rotating rounds, no CUDABLAME_STATS); goal 2's GPT own time of each
# (CUDABLAME_STATS=total, OWN_ROUNDS runs each, interleaved); then the GPU proof on a subset of
# gpu-check's cases (CASES: Python and C++ culprits, with sites and the Python stack cache on the
# path). About 420 s with the defaults.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the libraries in .gpu/
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2
  python3 -c 'import sys,torch,triton;print(sys.version.split()[0], torch.__version__, triton.__version__)'; } 2>&1
t0=$(date +%s)
ROUNDS=${ROUNDS:-7} RUNS=${RUNS:-"base|$PWD/.gpu/base.so|X=1;new|$PWD/.gpu/libcudablame.so|X=1"} \
  timeout "${PAIRED_TIMEOUT:-260}" bash scripts/gpu-calls/paired.sh > "$OUT/paired.log" 2>&1
grep -v "^r[0-9]" "$OUT/paired.log"
for ((r = 0; r < ${OWN_ROUNDS:-3}; r++)); do
  for l in base libcudablame; do
    line=$(timeout 50 taskset -c 2 env LD_PRELOAD="$PWD/.gpu/$l.so" CUDABLAME_REPORT=off CUDABLAME_STATS=total \
      python3 cuda-samples/bench/train_step.py --size gpt --steps 20 --paired 5 2>&1 |
      grep -o 'recorded after the first pause: [0-9]* ops, real call [0-9]* ns, cudablame [0-9]* ns' | head -1)
    echo "own $l r$r: $line"
  done
done | tee "$OUT/own.log"
echo "timing parts: $(( $(date +%s) - t0 )) s"
# shellcheck disable=SC2086
OUT=/tmp/oc BUILD_DIR=/tmp/bc timeout "${CHECK_TIMEOUT:-200}" scripts/gpu-check.sh \
  ${CASES:-cross_entropy_oob repeated_site_oob indexing_oob thread_oob triton_assert oob_write.static device_assert.shared threads.static} \
  > "$OUT/check.log" 2>&1
cp /tmp/oc/gpu-check.log "$OUT/gpu-check.log" 2>/dev/null
grep -hE "passed|^FAIL" "$OUT/check.log" | tail -12
echo "total: $(( $(date +%s) - t0 )) s"
