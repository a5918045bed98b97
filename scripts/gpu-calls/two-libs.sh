#!/bin/bash
# Two libraries side by side in CUDABLAME_STATS=total (steady own ns per op of the GPT step, SIZE=tiny the small one,
# ROUNDS interleaved rounds; EXTRA="label|ENV=value" adds a run of the new library with a setting),
# then, with BENCH=1, bench.sh's goal parts on the library with the lower median. The eleventh
# session's calls (docs/history.md, Performance): BASE=.gpu/base.so (a build of the commit compared
# against), the new library .gpu/libcudablame.so.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=CUDABLAME_STATS=total
BASE=${BASE:-$PWD/.gpu/base.so}
NEW=$PWD/.gpu/libcudablame.so
RUNS="base|$BASE|$T;new|$NEW|$T"
labels="base new"
if [ -n "${EXTRA:-}" ]; then RUNS+=";${EXTRA%%|*}|$NEW|$T ${EXTRA#*|}"; labels+=" ${EXTRA%%|*}"; fi
RUNS=$RUNS ROUNDS=${ROUNDS:-7} timeout "${PART_TIMEOUT:-300}" bash scripts/gpu-calls/components.sh > $OUT/components.log 2>&1
tar czf $OUT/clogs-two-libs-${SIZE:-gpt}.tgz -C /tmp clogs
own() { for f in /tmp/clogs/${SIZE:-gpt}-*-$1.txt; do grep -o 'cudablame stats:.*' "$f" | sed -nE 's/.*recorded after the first pause: [0-9]+ ops, real call ([0-9]+) ns, cudablame ([0-9]+) ns.*/\2 \1/p'; done; }
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for c in $labels; do echo "$c: steady own ns (real call ns): $(own $c | sed 's/ \(.*\)/ (\1)/' | tr '\n' ' ') median $(own $c | cut -d' ' -f1 | med)"; done
grep -E "^r[0-9]" $OUT/components.log
[ "${BENCH:-0}" = 1 ] || exit 0
if (( $(own new | cut -d' ' -f1 | med) > $(own base | cut -d' ' -f1 | med) )); then
  echo "choice: base"; cp "$BASE" .gpu/libcudablame.so; else echo "choice: new"; fi
t0=$(date +%s)
BENCH_QUICK=1 BENCH_STEPS=20 BENCH_N=30000 timeout -k 5 500 scripts/bench.sh gpu launch train stats > $OUT/bench.log 2>&1
echo "bench rc=$? $(( $(date +%s)-t0 ))s" >> $OUT/bench.log
grep -E "^goal" $OUT/bench.log | cut -c1-300
