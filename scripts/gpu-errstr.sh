#!/usr/bin/env bash
# gpu-errstr.sh: real-GPU proof that the error strings name the culprit (issue 23).
#
# Runs, each without and with the shim:
#   torch.assert   cuda-samples/python/errstr_torch.py assert   (device-side assert, 710)
#   torch.illegal  cuda-samples/python/errstr_torch.py illegal  (Triton, illegal address, 700)
#   torch.off      the assert with CUDABLAME_ERROR_STRING=off: str(e) is PyTorch's own
#   cupy           cuda-samples/python/errstr_cupy.py           (skipped without cupy)
#   cxx.shared / cxx.static   cuda-samples/errstr.cu built with -cudart shared / static
# and checks: with the shim, str(e) (PyTorch) and cuGetErrorString (C++) read "<the real text>
# [cudablame: culprit KERNEL, launched at FILE:LINE (exact); report PATH]"; with the note
# taken out they are byte for byte what the program printed without the shim; cudaGetErrorName
# and other codes' strings are unchanged. Static cudart and CuPy: whether their
# cudaGetErrorString carries the note is reported as an INFO line (what happens there is what
# this script is for), not a failure.
#
# Output: PASS/FAIL/SKIP/INFO lines, the PyTorch traceback of the assert case (uncaught, for the
# README) in $OUT/errstr-traceback.txt, then "N passed, M failed[, K skipped]".
# Environment: CUDABLAME_LIB (default $PWD/.gpu/libcudablame.so), OUT (default /tmp),
# BUILD_DIR (default /tmp/cudablame-errstr), NVCC_ARCH (default sm_90), PYTHON (default python3).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
REPO=$PWD
LIB=${CUDABLAME_LIB:-$REPO/.gpu/libcudablame.so}
OUT_DIR=${OUT:-/tmp}
BUILD_DIR=${BUILD_DIR:-/tmp/cudablame-errstr}
NVCC_ARCH=${NVCC_ARCH:-sm_90}
PYTHON=${PYTHON:-python3}
unset CUDA_LAUNCH_BLOCKING CUDABLAME_REPORT LD_PRELOAD CUDABLAME_ERROR_STRING
mkdir -p "$BUILD_DIR" "$OUT_DIR"
PASSED=0 FAILED=0 SKIPPED=0
pass() { echo "PASS $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }
skip() { echo "SKIP $1: $2"; SKIPPED=$((SKIPPED + 1)); }
info() { echo "INFO $1: $2"; }
[[ -f $LIB ]] || echo "WARNING: $LIB not found (set CUDABLAME_LIB)"

# value FILE KEY: the text after "KEY: " on the first such line.
value() { sed -n "s/^$2: //p" "$1" | head -n 1; }
# strip_note: the text without cudablame's " [cudablame: ...]".
strip_note() { sed -E 's/ \[cudablame: [^]]*\]//'; }

# run NAME ENV... -- CMD...: runs CMD without the shim (NAME.plain) and with it (NAME.shim).
run() {
    local name=$1
    shift
    local -a env=()
    while [[ $1 != -- ]]; do env+=("$1"); shift; done
    shift
    timeout 300 "$@" >"$BUILD_DIR/$name.plain" 2>"$BUILD_DIR/$name.plain.err"
    timeout 300 env LD_PRELOAD="$LIB" CUDABLAME_REPORT="$BUILD_DIR/$name-%p.json" "${env[@]}" "$@" \
        >"$BUILD_DIR/$name.shim" 2>"$BUILD_DIR/$name.shim.err"
}

# check_note NAME KEY KERNEL FILE: KEY's value with the shim carries the note naming KERNEL at
# FILE:<errstr-launch-line> (exact) and a report path, and equals the plain one without it.
check_note() {
    local name=$1 key=$2 kernel=$3 file=$4
    local shim plain line
    shim=$(value "$BUILD_DIR/$name.shim" "$key")
    plain=$(value "$BUILD_DIR/$name.plain" "$key")
    line=$(value "$BUILD_DIR/$name.shim" errstr-launch-line)
    echo "    with cudablame: $shim"
    echo "    without:        $plain"
    if [[ $shim != *"[cudablame: culprit $kernel"*", launched at $file:$line (exact); report "*"]"* ]]; then
        fail "$name $key" "no note naming $kernel at $file:$line (stderr: $BUILD_DIR/$name.shim.err)"
    elif [[ $(strip_note <<<"$shim") != "$plain" ]]; then
        fail "$name $key" "the text apart from the note differs from the program's own"
    else
        pass "$name $key"
    fi
}

# ---- PyTorch
if ! "$PYTHON" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    skip torch "torch with CUDA not importable"
else
    py=cuda-samples/python/errstr_torch.py
    run torch.assert -- "$PYTHON" "$py" assert
    check_note torch.assert errstr-str nll_loss errstr_torch.py
    run torch.illegal -- "$PYTHON" "$py" illegal
    if grep -q errstr-skip "$BUILD_DIR/torch.illegal.plain.err"; then
        skip torch.illegal "triton not importable"
    else
        check_note torch.illegal errstr-str scatter_blocks_kernel errstr_torch.py
    fi
    run torch.off CUDABLAME_ERROR_STRING=off -- "$PYTHON" "$py" assert
    if [[ $(value "$BUILD_DIR/torch.off.shim" errstr-str) == "$(value "$BUILD_DIR/torch.off.plain" errstr-str)" ]] &&
        ls "$BUILD_DIR"/torch.off-*.json >/dev/null 2>&1; then
        pass "torch.off str(e) is PyTorch's own, the report still written"
    else
        fail torch.off "str(e) changed with CUDABLAME_ERROR_STRING=off, or no report"
    fi
    env LD_PRELOAD="$LIB" CUDABLAME_REPORT="$BUILD_DIR/traceback-%p.json" "$PYTHON" "$py" assert raise \
        >"$OUT_DIR/errstr-traceback.txt" 2>&1
    echo "    traceback (uncaught, with cudablame): $OUT_DIR/errstr-traceback.txt"
fi

# ---- CuPy
if ! "$PYTHON" -c 'import cupy' 2>/dev/null; then
    skip cupy "cupy not importable"
else
    run cupy -- "$PYTHON" cuda-samples/python/errstr_cupy.py
    shim=$(value "$BUILD_DIR/cupy.shim" errstr-str)
    plain=$(value "$BUILD_DIR/cupy.plain" errstr-str)
    echo "    with cudablame: $shim"
    echo "    without:        $plain"
    if [[ $(strip_note <<<"$shim") != "$plain" ]]; then
        fail cupy "the message apart from the note differs from CuPy's own"
    elif [[ $shim == *"[cudablame: culprit scatter_rows"* ]]; then
        pass "cupy str(e) unchanged apart from the note"
        info cupy "CuPy's CUDARuntimeError carries the note"
    else
        pass "cupy str(e) unchanged"
        info cupy "CuPy's CUDARuntimeError does NOT carry the note (its cudaGetErrorString is not cudablame's)"
    fi
fi

# ---- C++ (static and shared cudart)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [[ ! -x $nvcc ]]; then
    skip cxx "nvcc not found"
else
    for variant in shared static; do
        bin=$BUILD_DIR/errstr.$variant
        if ! "$nvcc" -O2 -g -arch="$NVCC_ARCH" -cudart "$variant" -o "$bin" cuda-samples/errstr.cu -lcuda \
            >"$BUILD_DIR/build.$variant.log" 2>&1; then
            fail "cxx.$variant" "build failed ($BUILD_DIR/build.$variant.log)"
            continue
        fi
        name=cxx.$variant
        run "$name" -- "$bin"
        check_note "$name" errstr-cu assert_positive errstr.cu
        for key in errstr-name errstr-other; do
            if [[ $(value "$BUILD_DIR/$name.shim" $key) == "$(value "$BUILD_DIR/$name.plain" $key)" ]]; then
                pass "$name $key unchanged"
            else
                fail "$name $key" "differs with the shim"
            fi
        done
        if [[ $variant == shared ]]; then
            check_note "$name" errstr-rt assert_positive errstr.cu
        elif [[ $(value "$BUILD_DIR/$name.shim" errstr-rt) == *"[cudablame:"* ]]; then
            info "$name" "static cudart's cudaGetErrorString carries the note (it asks the driver's cuGetErrorString)"
        else
            info "$name" "static cudart's cudaGetErrorString does NOT carry the note (its own table): $(value "$BUILD_DIR/$name.shim" errstr-rt)"
        fi
    done
fi

echo "$PASSED passed, $FAILED failed${SKIPPED:+, $SKIPPED skipped}"
((FAILED == 0))
