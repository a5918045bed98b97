#!/bin/bash
# Libraries side by side in CUDABLAME_STATS=total: the steady own ns per op (and the real call's
# ns, the process's host speed) of the GPT step, ROUNDS (7) interleaved rounds, then the tiny
# step, TINY_ROUNDS (3). LIBS="label=path ..." (default: base, ctx, hot in .gpu/, the twelfth
# session's second call). Own time follows the host's speed from one process to the next: compare
# the medians of own / real call as well as of own time.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=CUDABLAME_STATS=total
LIBS=${LIBS:-"base=$PWD/.gpu/base.so ctx=$PWD/.gpu/ctx.so hot=$PWD/.gpu/libcudablame.so"}
RUNS="" labels=""
for l in $LIBS; do RUNS+="${l%%=*}|${l#*=}|$T;"; labels+=" ${l%%=*}"; done
own() { for f in /tmp/clogs/$1-*-$2.txt; do grep -o 'cudablame stats:.*' "$f" | sed -nE 's/.*recorded after the first pause: [0-9]+ ops, real call ([0-9]+) ns, cudablame ([0-9]+) ns.*/\2 \1/p'; done; }
med() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
RUNS=$RUNS ROUNDS=${ROUNDS:-7} timeout 300 bash scripts/gpu-calls/components.sh > $OUT/components-gpt.log 2>&1
SIZE=tiny RUNS=$RUNS ROUNDS=${TINY_ROUNDS:-3} timeout 120 bash scripts/gpu-calls/components.sh > $OUT/components-tiny.log 2>&1
tar czf $OUT/clogs-libs.tgz -C /tmp clogs
for s in gpt tiny; do for c in $labels; do
  echo "$s $c: steady own ns (real call ns): $(own $s $c | sed 's/ \(.*\)/ (\1)/' | tr '\n' ' ') median $(own $s $c | cut -d' ' -f1 | med), own / real median $(own $s $c | awk '{printf "%.3f\n", $1 / $2}' | med)"
done; done
grep -hE "^r[0-9]" $OUT/components-gpt.log $OUT/components-tiny.log
