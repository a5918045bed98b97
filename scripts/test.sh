#!/usr/bin/env bash
# The project's test command (README, .ci/run): builds the shim, the simulated driver and the
# command, then runs every unit and integration test. No GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace
cargo test --release --workspace "$@"
