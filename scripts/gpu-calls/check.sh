#!/bin/bash
# One call: gpu-check (C++ and Python lanes in parallel), robust, errstr, prototypes, torchrun.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library and the command in .gpu/
L=/tmp/logs; mkdir -p $L
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -2; python3 -c 'import sys,torch,triton;print(sys.version.split()[0], torch.__version__, triton.__version__)'; } > $L/versions.txt 2>&1
t0=$(date +%s)
( OUT=/tmp/o1 BUILD_DIR=/tmp/b1 scripts/gpu-check.sh .static .shared > $L/cxx.log 2>&1; echo "cxx rc=$? $(( $(date +%s)-t0 ))s" >> $L/times.txt ) &
( OUT=/tmp/o2 BUILD_DIR=/tmp/b2 scripts/gpu-check.sh .py > $L/py.log 2>&1; echo "py rc=$? $(( $(date +%s)-t0 ))s" >> $L/times.txt ) &
PROTOTYPES=.gpu/entry_point_check.cpp scripts/check-prototypes.sh > $L/proto.log 2>&1
scripts/gpu-robust.sh > $L/robust.log 2>&1; echo "robust rc=$? $(( $(date +%s)-t0 ))s" >> $L/times.txt
scripts/gpu-errstr.sh > $L/errstr.log 2>&1; echo "errstr rc=$? $(( $(date +%s)-t0 ))s" >> $L/times.txt
CUDABLAME=.gpu/cudablame REPORTS=/tmp/tr scripts/torchrun-example.sh > $L/torchrun.log 2>&1; echo "torchrun rc=$? $(( $(date +%s)-t0 ))s" >> $L/times.txt
wait
cp /tmp/o1/gpu-check.log $L/cxx-check.log 2>/dev/null; cp /tmp/o2/gpu-check.log $L/py-check.log 2>/dev/null
for f in $L/*.hang /tmp/b1/work/logs/*.hang /tmp/b2/work/logs/*.hang; do [ -f "$f" ] && cp "$f" $L/; done 2>/dev/null
tar czf $OUT/logs.tgz -C /tmp logs
cat $L/times.txt; grep -h "passed" $L/*.log; grep -h "^FAIL" $L/*.log
python3 scripts/gpu-verdicts.py $L/cxx-check.log $L/py-check.log | tee $L/verdicts.txt
