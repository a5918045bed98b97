#!/usr/bin/env bash
# gpu-robust.sh: issue 19's "never crash, hang or slow the program" checks on a real GPU
# (items 1, 2 and 3; item 7 is cuda-samples/marker_other_context.cu in gpu-check.sh, also to be
# run as `CUDABLAME_MARKERS=every scripts/gpu-check.sh marker_other_context`). Builds the
# programs of cuda-samples/robust/ with nvcc and runs each with and without the shim:
#   first_call_race   8 threads behind a barrier make their first CUDA call, 100 forked
#                     rounds: no crash (item 1)
#   ctor_threads      a CUDA program dlopens a library whose constructor waits for threads
#                     that create threads: no hang (20 s limit), same output (item 2)
#   thread_cost       2,000 thread creations from a library of 60,000 symbols: with the shim
#                     at most 3x the time without (best of 3 interleaved runs) (item 3)
#   std_thread_fnptr  a launch from std::thread t(producer, d): the report's thread_start
#                     names producer(int*) (item 3)
#
# Usage: scripts/gpu-robust.sh            (from anywhere)
# Environment: CUDABLAME_LIB (default $PWD/.gpu/libcudablame.so, else target/release/),
#   BUILD_DIR (default /tmp/cudablame-robust), NVCC_ARCH (default sm_90).
# Output: one "PASS name" / "FAIL name: why" line per check, then "N passed, M failed".
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$PWD
LIB=${CUDABLAME_LIB:-$ROOT/.gpu/libcudablame.so}
[ -f "$LIB" ] || LIB=$ROOT/target/release/libcudablame.so
ARCH=${NVCC_ARCH:-sm_90}
B=${BUILD_DIR:-/tmp/cudablame-robust}
SRC=$ROOT/cuda-samples/robust
mkdir -p "$B"
unset CUDA_LAUNCH_BLOCKING
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
[ -f "$LIB" ] || { echo "no shim at $LIB"; echo "0 passed, 1 failed"; exit 1; }

build() { # name, extra nvcc words...
    local name=$1
    shift
    nvcc -arch="$ARCH" -O2 -o "$B/$name" "$SRC/$name.cu" "$@" >"$B/$name.build.log" 2>&1 ||
        { fail "$name" "build failed: $(tail -3 "$B/$name.build.log" | tr '\n' ' ')"; return 1; }
}
shim() { env LD_PRELOAD="$LIB" CUDABLAME_REPORT="$B/report.json" "$@"; }

# 1. first calls at once
if build first_call_race -lcuda -lpthread; then
    plain=$(timeout 300 "$B/first_call_race" 100 8 2>&1)
    with=$(timeout 300 env LD_PRELOAD="$LIB" "$B/first_call_race" 100 8 2>&1)
    if [ "$with" = "rounds=100 crashed=0 failed=0" ] && [ "$plain" = "$with" ]; then
        pass first_call_race
    else
        fail first_call_race "without: '$plain', with: '$with'"
    fi
fi

# 2. constructor waiting for threads inside dlopen
if nvcc -arch="$ARCH" -shared -Xcompiler -fPIC -o "$B/libctor_threads.so" "$SRC/ctor_threads_lib.cu" \
    >"$B/ctor_lib.build.log" 2>&1 && build ctor_threads -ldl; then
    plain=$(timeout 20 "$B/ctor_threads" "$B/libctor_threads.so" 2>&1)
    rc_plain=$?
    with=$(timeout 20 env LD_PRELOAD="$LIB" "$B/ctor_threads" "$B/libctor_threads.so" 2>&1)
    rc_with=$?
    if [ $rc_with -eq 124 ]; then
        fail ctor_threads "hung (killed after 20 s)"
    elif [ $rc_with -eq 0 ] && [ "$with" = "ctor_result=42 cuda=ok" ] && [ "$plain" = "$with" ]; then
        pass ctor_threads
    else
        fail ctor_threads "without: rc $rc_plain '$plain', with: rc $rc_with '$with'"
    fi
fi

# 3a. thread creation cost from a library of many symbols
if build thread_cost -ldl; then
    awk 'BEGIN {
        print "#include <pthread.h>";
        print "static void *body(void *a) { return a; }";
        print "int spawn_threads(int n) { int ok = 0; for (int i = 0; i < n; i++) { pthread_t t;";
        print "  if (pthread_create(&t, 0, body, 0) == 0) { pthread_join(t, 0); ok++; } } return ok; }";
        for (i = 0; i < 60000; i++) printf "int many_symbols_v%d = %d;\n", i, i;
    }' >"$B/manysyms.c"
    if cc -O0 -shared -fPIC -o "$B/libmanysyms.so" "$B/manysyms.c" -lpthread; then
        best_plain=999999999 best_with=999999999
        for _ in 1 2 3; do
            p=$("$B/thread_cost" "$B/libmanysyms.so" 2000 | sed -n 's/^ns_per_thread=//p')
            w=$(env LD_PRELOAD="$LIB" "$B/thread_cost" "$B/libmanysyms.so" 2000 | sed -n 's/^ns_per_thread=//p')
            [ -n "$p" ] && [ "$p" -lt "$best_plain" ] && best_plain=$p
            [ -n "$w" ] && [ "$w" -lt "$best_with" ] && best_with=$w
        done
        echo "thread_cost: ns per thread, best of 3: $best_plain without, $best_with with cudablame"
        if [ "$best_with" -le $((3 * best_plain + 5000)) ]; then
            pass thread_cost
        else
            fail thread_cost "$best_with ns with the shim vs $best_plain ns without"
        fi
    else
        fail thread_cost "building libmanysyms.so failed"
    fi
fi

# 3b. std::thread running a function pointer is named
if build std_thread_fnptr; then
    rm -f "$B/report.json"
    shim "$B/std_thread_fnptr" >/dev/null 2>"$B/std_thread_fnptr.err"
    start=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["culprit"]["op"].get("thread_start",""))' \
        "$B/report.json" 2>/dev/null)
    case "$start" in
    "std::thread running producer(int*)"*) pass std_thread_fnptr ;;
    *) fail std_thread_fnptr "thread_start '$start' (stderr: $(head -c 300 "$B/std_thread_fnptr.err" | tr '\n' ' '))" ;;
    esac
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
