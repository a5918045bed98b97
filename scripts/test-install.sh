#!/usr/bin/env bash
# Installs cudablame the ways users do, then runs it from there, without a GPU (called by .ci/run):
#   1. the wheel: `pip wheel .` (maturin, fetched from PyPI into pip's isolated build
#      environment), installed into a fresh virtual environment; from that environment
#      `cudablame demo` (simulated driver), `cudablame run -- python3 <script>` (a Python program
#      faulting on the simulated driver: the report must name its kernel and Python line) and
#      `python -m cudablame`;
#   2. the README's own `cargo install` line, as written there (`cargo install --path crates/cli`,
#      no variable, the workspace's target/ reused), into a temporary CARGO_INSTALL_ROOT;
#      `cudablame run -- /bin/true` and `cudablame demo` from there, with an empty HOME (the
#      embedded library is extracted there), and no "is not a cudablame variable" line;
#   3. the packaged crate: `cargo package --workspace --no-verify`, then the README's block for
#      installing from the .crate files, as written there, in a folder holding only them
#      (CARGO_TARGET_DIR=target/install-package, so reruns are incremental).
# Each check prints "ok NAME" or "FAILED NAME" with its log; the last line is "N passed, M failed".
# Build output goes to target/ (wheel, release, embed) and target/install-package (incremental).
#   scripts/test-install.sh            # all three
#   scripts/test-install.sh wheel      # only the wheel
#   scripts/test-install.sh cargo      # only cargo install --path
#   scripts/test-install.sh crate      # only the packaged crate
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
what=${1:-all}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# check NAME COMMAND...: runs COMMAND with its output in a log; shows the log when it fails.
check() {
    local name=$1
    shift
    if "$@" >"$work/log" 2>&1; then
        echo "ok $name"
        passed=$((passed + 1))
    else
        echo "FAILED $name (exit $?):"
        sed 's/^/    /' "$work/log" | tail -40
        failed=$((failed + 1))
    fi
}

# A user's shell: PATH with the installed command first, nothing of this repository, empty HOME.
as_user() {
    local bin=$1
    shift
    env -i PATH="$bin:/usr/local/bin:/usr/bin:/bin" HOME="$work/home" TMPDIR="$work/tmp" "$@"
}
mkdir -p "$work/home" "$work/tmp"

# The Python program of the checks: faults on the simulated driver (shim-tests/programs).
py_program="$root/shim-tests/programs/py_launch.py"
py_line=$(grep -n '# @launch_bad' "$py_program" | cut -d: -f1)

# expect_report FILE KERNEL [PYTHON_LINE]: the JSON report names KERNEL (and the line).
expect_report() {
    python3 - "$@" <<'PY'
import json, sys
path, kernel = sys.argv[1], sys.argv[2]
r = json.load(open(path))
op = r["culprit"]["op"]
assert op["kernel"] == kernel, (op["kernel"], kernel)
if len(sys.argv) > 3:
    lines = [f["line"] for f in op["python_stack"]]
    assert int(sys.argv[3]) in lines, (lines, sys.argv[3])
print("culprit", op["kernel"], r["culprit"]["confidence"])
PY
}

# py_run BIN: the Python program under `cudablame run` from BIN; its own exit status is the
# CUDA error's, so success is the report on disk.
py_run() {
    (cd "$work" && env -i PATH="$1:/usr/local/bin:/usr/bin:/bin" HOME="$work/home" TMPDIR="$work/tmp" \
        LD_LIBRARY_PATH="$work/driver" cudablame run --report "$work/py/r.json" -- python3 "$py_program" main)
    test -f "$work/py/r.json"
}

wheel_checks() {
    local venv="$work/venv" wheels="$work/wheels"
    # maturin from PyPI into pip's isolated build environment; an installed maturin is used
    # as it is (no network needed then).
    local isolation=()
    python3 -c 'import maturin' 2>/dev/null && isolation=(--no-build-isolation)
    check "wheel builds (pip wheel .)" python3 -m pip wheel --quiet "${isolation[@]}" . --no-deps -w "$wheels"
    check "wheel installs into a fresh venv" \
        sh -c "python3 -m venv '$venv' && '$venv/bin/pip' install --quiet --no-index '$wheels'/cudablame-*.whl"
    check "cudablame is on the venv's PATH" as_user "$venv/bin" sh -c 'command -v cudablame | grep -q "^'"$venv"'/bin/cudablame$"'
    check "cudablame demo (simulated) from the venv" \
        as_user "$venv/bin" sh -c 'cudablame demo --simulated --report-dir "$TMPDIR" 2>&1 | tee /dev/stderr | grep -q "names histogram_oob (exact), launched from .*enqueue_histogram"'
    # The simulated driver as libcuda.so.1 for the Python program: the one the demo extracted.
    local fake
    fake=$(find "$work/home/.cache/cudablame" -name libfakecuda.so | head -1)
    mkdir -p "$work/driver" && ln -sf "$fake" "$work/driver/libcuda.so.1"
    check "cudablame run -- python3 script (report written, folder made)" py_run "$venv/bin"
    check "the report names the Python program's kernel and line" expect_report "$work/py/r.json" bad "$py_line"
    check "cudablame run -- python3 -c (exit status kept, library preloaded)" \
        as_user "$venv/bin" sh -c 'cudablame run -- python3 -c "import os, sys; assert \"libcudablame.so\" in os.environ[\"LD_PRELOAD\"]; sys.exit(7)"; test $? -eq 7'
    check "python -m cudablame" as_user "$venv/bin" sh -c 'python -m cudablame --version | grep -q "^cudablame "'
}

# readme_line TEXT: the README's line that starts with TEXT, without its comment (fails when the
# README has no such line: the test runs what the README says).
readme_line() {
    local line
    line=$(grep -m1 -E "^$1( |$)" README.md) || { echo "README.md has no line: $1" >&2; return 1; }
    echo "${line%%#*}"
}

# readme_block NAME: the lines of the README's ```sh block after the line <!-- NAME -->.
readme_block() {
    awk -v m="<!-- $1 -->" '$0 == m {f = 1; next} f && /^```sh/ {b = 1; next} b && /^```/ {exit} b {print}' README.md
}

# installed_checks ROOT NAME: the installed command works as a user's.
installed_checks() {
    local croot=$1 what=$2
    check "$what: cudablame run -- /bin/true" as_user "$croot/bin" cudablame run -- /bin/true
    check "$what: cudablame demo (simulated)" \
        as_user "$croot/bin" sh -c 'cd "$TMPDIR" && cudablame demo --simulated 2>&1 | tee /dev/stderr | grep -q "names histogram_oob (exact), launched from .*enqueue_histogram"'
    check "$what: library extracted to the user cache" \
        sh -c "ls '$work'/home/.cache/cudablame/*/libcudablame.so"
    check "$what: CUDABLAME_EMBED=1 exported is not called a typo" \
        as_user "$croot/bin" sh -c 'cd "$TMPDIR" && out=$(CUDABLAME_EMBED=1 cudablame demo --simulated 2>&1); echo "$out"; case $out in *"not a cudablame variable"*) exit 1 ;; *"names histogram_oob"*) exit 0 ;; *) exit 1 ;; esac'
}

cargo_checks() {
    local croot="$work/cargo-root" line
    line=$(readme_line "cargo install --path crates/cli") || { failed=$((failed + 1)); return; }
    echo "README: $line"
    check "$line" env CARGO_INSTALL_ROOT="$croot" sh -c "$line --quiet"
    installed_checks "$croot" "cargo-installed"
}

crate_checks() {
    # The .crate files are unpacked outside this repository (inside it, cargo would take them for
    # members of this workspace).
    local croot="$work/crate-root" block crates="$work/crates"
    block=$(readme_block install-from-crate)
    [ -n "$block" ] || { echo "FAILED README.md has no <!-- install-from-crate --> block"; failed=$((failed + 1)); return; }
    rm -rf "$root/target/package"/*.crate "$crates" && mkdir -p "$crates"
    check "cargo package --workspace --no-verify" cargo package --workspace --no-verify --quiet --allow-dirty
    cp "$root"/target/package/*.crate "$crates/"
    echo "README (in a folder with the .crate files):"
    echo "$block" | sed 's/^/    /'
    check "install from the .crate files (README block)" \
        sh -c "cd '$crates' && export CARGO_INSTALL_ROOT='$croot' CARGO_TARGET_DIR='$root/target/install-package/target' && set -e && $(echo "$block" | sed 's/$/;/' | tr '\n' ' ')"
    rm -rf "$work/home/.cache"
    installed_checks "$croot" "crate-installed"
}

case $what in
wheel) wheel_checks ;;
cargo) cargo_checks ;;
crate) crate_checks ;;
*)
    wheel_checks
    rm -rf "$work/home/.cache"
    cargo_checks
    rm -rf "$work/home/.cache"
    crate_checks
    ;;
esac
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
