#!/bin/bash
# The marker gap stretched by the host's marker cost (twenty-first session, issue 21): .gpu/head.so
# (the library before) against .gpu/libcudablame.so. PART=paired: goal 4's same-process verdict
# for the gpt and tiny steps (SIZES), side by side in rotating rounds (paired.sh, BUDGET_S 360). PART=own:
# goal 2's GPT own time (CUDABLAME_STATS=total, steady ops) and the markers per run, ROUNDS (3)
# rotating rounds of one process per library (components.sh). PART="paired own": both.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the libraries in .gpu/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
H=$PWD/.gpu/head.so N=$PWD/.gpu/libcudablame.so
for part in ${PART:-paired}; do
case $part in
  paired)
    BUDGET_S=${BUDGET_S:-360} ROUNDS=40 SIZES=${SIZES:-tiny,gpt} RUNS="head|$H|X=1;new|$N|X=1" \
      bash scripts/gpu-calls/paired.sh ;;
  own)
    RUNS="head|$H|CUDABLAME_STATS=total;new|$N|CUDABLAME_STATS=total" ROUNDS=${ROUNDS:-3} \
      bash scripts/gpu-calls/components.sh 2>&1 | grep -v "^[0-9]* recorded" |
      sed -E 's/; other calls.*recorded after the first pause: /; steady: /' | cut -c1-700 ;;
esac
done
