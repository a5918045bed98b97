#!/usr/bin/env bash
# The project's test command (README, .ci/run): builds the shim, the simulated driver and the
# command, then runs every unit and integration test. No GPU needed. Ends with one line
# "total: N passed, M failed" summing cargo's per-binary results; every test binary runs even
# when one fails (--no-fail-fast), and the exit status is non-zero if any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --release --workspace --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "total: %d passed, %d failed\n", p, f }' "$log"
if [ "$status" -eq 0 ] && grep -q '^test result: FAILED' "$log"; then status=1; fi
exit "$status"
