#!/bin/bash
# One call: scripts/bench.sh's goal parts on the final library.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library and the command in .gpu/
L=/tmp/blogs; mkdir -p $L
PARTS=${PARTS:-gpu launch train stats}
t0=$(date +%s)
BENCH_QUICK=1 BENCH_STEPS=${STEPS:-20} BENCH_N=30000 scripts/bench.sh $PARTS > $L/bench.log 2>&1
echo "bench rc=$? $(( $(date +%s)-t0 ))s" >> $L/bench.log
tar czf $OUT/blogs.tgz -C /tmp blogs
grep -E "^goal|paired|same process|recording vs paused|cudablame stats|paused|no shim|default" $L/bench.log | cut -c1-400 | tail -80
tail -3 $L/bench.log
