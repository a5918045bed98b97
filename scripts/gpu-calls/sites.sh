#!/bin/bash
# Launch-site stacks (src/stack/sites.rs) on a real PyTorch culprit, default vs CUDABLAME_STACK=every:
# the culprit's native frames and the stats' site count; then LIBS (default: .gpu/base.so, a build
# before sites, against .gpu/libcudablame.so) side by side in libs.sh. Written in the fourteenth
# session; first run in the fifteenth (README, Verified on). About 420 s; SITES_ONLY=1: the frames
# only (about 30 s).
cd "$(dirname "$0")/../.." || exit 2
t0=$(date +%s)
for m in native every; do
  CUDABLAME_STACK=$m CUDABLAME_STACK_DEPTH=32 CUDABLAME_STATS=on CUDABLAME_REPORT=$OUT/site-$m.json LD_PRELOAD=$PWD/.gpu/libcudablame.so timeout 90 python3 cuda-samples/python/repeated_site_oob.py > $OUT/site-$m.log 2>&1
  python3 - "$OUT/site-$m.json" "$m" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); c = r["culprit"]; op = c["op"]
print(sys.argv[2], c["confidence"], op["seq"], op["kernel"][:70], "native frames", len(op["stack"]))
for f in op["stack"]:
    print("   ", (f.get("function") or "?")[:100], "|", (f.get("module") or "").rsplit("/", 1)[-1])
print("   python:", [(f.get("function"), f.get("line")) for f in op.get("python_stack", [])[:4]])
PY
  grep -o "launch sites [0-9]*\|for [0-9]* bytes" $OUT/site-$m.log | tr '\n' ' '; echo
done
echo "sites $(( $(date +%s)-t0 ))s"
[ -n "${SITES_ONLY:-}" ] && exit 0  # the culprit's frames only, without libs.sh
LIBS=${LIBS:-"base=$PWD/.gpu/base.so new=$PWD/.gpu/libcudablame.so"} ROUNDS=7 TINY_ROUNDS=5 timeout 420 bash scripts/gpu-calls/libs.sh > $OUT/libs.log 2>&1
echo "libs rc=$? $(( $(date +%s)-t0 ))s"
cat $OUT/libs.log
