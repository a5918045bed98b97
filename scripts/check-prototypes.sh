#!/usr/bin/env bash
# Checks every hooked prototype of src/cuda/entry_points.rs against the real cuda.h (issue 18):
# the library's `prototype_check` test writes target/entry_point_check.cpp from the entry-point
# list, then g++ compiles it twice against cuda.h, without and with
# CUDA_API_PER_THREAD_DEFAULT_STREAM (the _ptsz/_ptds names are declared only then). Names this
# cuda.h does not declare (older variants such as cuStreamWriteValue32) are listed and skipped.
# Needs the CUDA headers (CUDA_HOME, default /usr/local/cuda); run it on the GPU machine, with
# PROTOTYPES=<the generated file> where there is no cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
inc="${CUDA_HOME:-/usr/local/cuda}/include"
[ -f "$inc/cuda.h" ] || { echo "no $inc/cuda.h (set CUDA_HOME)" >&2; exit 2; }
# The GPU machine has no Rust: there, pass the file generated here (PROTOTYPES=.gpu/entry_point_check.cpp).
file=${PROTOTYPES:-}
if [ -z "$file" ]; then
    cargo test --release -p cudablame-preload --lib prototype_check -- --quiet
    file="${CARGO_TARGET_DIR:-target}/entry_point_check.cpp"
fi
check() {
    local skips=() err names
    while :; do
        if err=$(g++ -std=c++17 -fsyntax-only -x c++ -I"$inc" -include cuda.h "$@" "${skips[@]}" "$file" 2>&1); then
            break
        fi
        names=$(grep -o "'[A-Za-z0-9_]*' was not declared\|‘[A-Za-z0-9_]*’ was not declared" <<<"$err" | tr -d "'‘’" | awk '{print $1}' | sort -u || true)
        if [ -z "$names" ]; then echo "$err" >&2; echo "prototype check FAILED ($*)" >&2; exit 1; fi
        for n in $names; do skips+=("-DCUDABLAME_SKIP_$n"); echo "  not declared by this cuda.h: $n"; done
    done
    echo "prototype check ok ($*)"
}
check -UCUDA_API_PER_THREAD_DEFAULT_STREAM
check -DCUDA_API_PER_THREAD_DEFAULT_STREAM
