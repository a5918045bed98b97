#!/bin/bash
# Explore: does pinning the whole PyTorch process to one CPU cause the 2x own-time drift?
# And which native frames the 8 KiB stack copy gives a PyTorch culprit vs 4 KiB.
set -u
cd "$(dirname "$0")/../.." || exit 2  # the repository root; the library and the command in .gpu/
L=/tmp/elogs; mkdir -p $L
LIB=$PWD/.gpu/libcudablame.so
stats_run() { # PIN_SPEC
  local pin=()
  [[ $1 != none ]] && pin=(taskset -c "$1")
  "${pin[@]}" env LD_PRELOAD=$LIB CUDABLAME_STATS=on python3 cuda-samples/bench/train_step.py --size gpt --steps 20 2>&1 | grep -E "gpt_step_ms|cudablame stats" | tr '\n' ' '
  echo
}
for r in 1 2 3 4 5 6 7; do
  for pin in 2 2-5 none; do
    echo "round $r pin $pin: $(stats_run $pin)" >> $L/pin.txt
  done
done
for b in 8192 4096; do
  rm -rf /tmp/rep$b; mkdir -p /tmp/rep$b
  env LD_PRELOAD=$LIB CUDABLAME_STACK_BYTES=$b CUDABLAME_REPORT=/tmp/rep$b/r.json python3 cuda-samples/python/errstr_torch.py assert > $L/depth$b.txt 2>&1
  python3 - /tmp/rep$b/r.json >> $L/depth$b.txt 2>&1 <<'PY'
import json,sys
r=json.load(open(sys.argv[1]))
op=r["culprit"]["op"]
print("kernel", op.get("kernel"))
for f in op.get("stack",[]): print("  ", f.get("function"), f.get("module") or f.get("file"))
for f in op.get("python_stack",[]): print("  py", f.get("function"), f.get("file"), f.get("line"))
PY
done
tar czf $OUT/elogs.tgz -C /tmp elogs
sed -E 's/cudablame stats: [0-9]+ recorded ops; mean ns per op: total [0-9]+ = //; s/marked ([0-9]+) of.*/marked \1/; s/native stack copy/copy/; s/ for 8192 bytes//; s/stream and kernel lookup/lookup/' $L/pin.txt
cat $L/depth8192.txt | tail -40; cat $L/depth4096.txt | tail -40
