#!/usr/bin/env bash
# gpu-differential.sh: real-GPU proof that cudablame never changes a correct program's results.
#
# Runs each correct (non-faulting) script in cuda-samples/python/correct/*.py twice without
# cudablame and once with it (LD_PRELOAD, default settings: no CUDABLAME_* variable set), each
# run in a fresh empty directory (so a report file the shim wrote would be visible there), and
# compares:
#   - exit codes: the same in all three runs (and 0: a sample that fails by itself proves nothing);
#   - the `RESULT <name> <digest>` lines on stdout: equal between the two runs without cudablame
#     (else the sample is nondeterministic: SKIP, not FAIL), and equal with and without it;
#   - no cudablame output: no stderr line of the run with cudablame starts with "cudablame" or
#     "==== cudablame" (the shim prints nothing for a correct program), and no file whose name
#     contains "cudablame" (a report, or its temporary) appears in the run's directory.
# First, one positive control ("shim-active"): a tiny torch program under the shim with
# CUDABLAME_STATS=on must print "cudablame stats: N recorded ops" with N > 0, proving that the
# library is preloaded and records this Python's launches (else the differential proves nothing).
#
# Usage (from anywhere; it works from the repo root):
#   scripts/gpu-differential.sh               # all cases
#   scripts/gpu-differential.sh mlp graph     # only cases whose name contains a word
#
# Environment:
#   CUDABLAME_LIB  shim to test            (default: <repo>/.gpu/libcudablame.so)
#   OUT            logs go to $OUT/differential/ (default: /tmp); per run NAME.{base1,base2,shim}.{out,err}
#   PYTHON         default python3
#   RUN_TIMEOUT    seconds per run (default 300)
#
# Output: one "PASS name" / "FAIL name: why" / "SKIP name: why" line per case (with indented
# detail lines), then exactly one summary line "N passed, M failed[, K skipped]".
# Exit status 0 iff nothing failed. Expected GPU time: about 1-2 minutes (3 runs of 5 scripts of a
# few seconds each, mostly Python and torch start-up).
set -u

# Resolve paths given relative to the caller's directory before moving to the repo root.
absolute() {  # absolute PATH: PATH with the caller's directory prepended if it is relative
    if [[ $1 == /* ]]; then printf '%s' "$1"; else printf '%s/%s' "$PWD" "$1"; fi
}
PYTHON=${PYTHON:-python3}
[[ $PYTHON == */* ]] && PYTHON=$(absolute "$PYTHON")   # a path, not a command name
LIB_GIVEN=${CUDABLAME_LIB:-}
[[ -n $LIB_GIVEN ]] && LIB_GIVEN=$(absolute "$LIB_GIVEN")
OUT_DIR=$(absolute "${OUT:-/tmp}")

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
REPO=$PWD
LIB=${LIB_GIVEN:-$REPO/.gpu/libcudablame.so}
LOGS=$OUT_DIR/differential
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
CASES_DIR=$REPO/cuda-samples/python/correct

# Default settings for every run: no inherited CUDABLAME_* variable (an unknown one, such as
# CUDABLAME_LIB, would itself make the shim print a warning), no preload, asynchronous launches.
while read -r var; do
    unset "$var"
done < <(compgen -e | grep '^CUDABLAME_')
unset LD_PRELOAD CUDA_LAUNCH_BLOCKING

PASSED=0 FAILED=0 SKIPPED=0
FILTERS=("$@")

# ---------------------------------------------------------------- helpers

say() {  # say TEXT [PREFIX]: each line of TEXT, after PREFIX, to stdout and the summary file
    local line
    while IFS= read -r line; do
        printf '%s%s\n' "${2:-}" "$line"
        printf '%s%s\n' "${2:-}" "$line" >>"$LOGS/summary.txt"
    done <<<"$1"
}

record() {  # record pass|fail|skip LINE [DETAIL...]: details (multi-line allowed) indented
    local status=$1 line=$2 d
    shift 2
    say "$line"
    for d in "$@"; do
        say "$d" "    "
    done
    case $status in
        pass) PASSED=$((PASSED + 1)) ;;
        skip) SKIPPED=$((SKIPPED + 1)) ;;
        *) FAILED=$((FAILED + 1)) ;;
    esac
}

selected() {  # selected NAME: no filter given, or NAME contains one of them
    local f
    ((${#FILTERS[@]} == 0)) && return 0
    for f in "${FILTERS[@]}"; do
        [[ $1 == *"$f"* ]] && return 0
    done
    return 1
}

now() { date +%s.%N; }

# run_one LOGBASE shim|base COMMAND...: runs COMMAND in a fresh empty directory, stdout and stderr
# to LOGBASE.out / LOGBASE.err, with the shim preloaded when asked. Sets RUN_RC, RUN_SECS and
# RUN_FILES (the names of files containing "cudablame" left in the directory, space-separated;
# those are copied to LOGBASE.files/).
run_one() {
    local log=$1 mode=$2 dir t0 t1 f
    shift 2
    dir=$(mktemp -d "${TMPDIR:-/tmp}/diffrun.XXXXXX") || {
        RUN_RC=125 RUN_SECS=0 RUN_FILES=""
        return
    }
    local -a pre=()
    [[ $mode == shim ]] && pre=(env LD_PRELOAD="$LIB")
    t0=$(now)
    (cd "$dir" && exec timeout -k 10 "$RUN_TIMEOUT" ${pre[@]+"${pre[@]}"} "$@") \
        >"$log.out" 2>"$log.err"
    RUN_RC=$?
    t1=$(now)
    RUN_SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    RUN_FILES=""
    while IFS= read -r -d '' f; do
        RUN_FILES+="${RUN_FILES:+ }${f#"$dir"/}"
        mkdir -p "$log.files"
        cp -p "$f" "$log.files/" 2>/dev/null
    done < <(find "$dir" -mindepth 1 -name '*cudablame*' -print0 2>/dev/null)
    rm -rf "$dir"
}

results_of() { grep '^RESULT ' "$1" 2>/dev/null; }   # the RESULT lines of a stdout log

cudablame_lines() {  # the stderr lines cudablame would print (warnings, reports, ld.so refusal)
    grep -E '^(==== )?cudablame|LD_PRELOAD cannot be preloaded' "$1" 2>/dev/null
}

timed_out() { [[ $1 == 124 || $1 == 137 ]]; }

# ---------------------------------------------------------------- cases

# The positive control: the shim is preloaded and records the launches of a torch program.
shim_active() {
    local name=shim-active log=$LOGS/shim-active.shim n
    selected "$name" || return 0
    local prog='import torch
x = torch.ones(1024, device="cuda")
print("sum", (x * 2).sum().item())'
    run_one "$log" base env CUDABLAME_STATS=on LD_PRELOAD="$LIB" "$PYTHON" -c "$prog"
    n=$(sed -n -E 's/^cudablame stats: ([0-9]+) recorded ops.*/\1/p' "$log.err" | tail -n 1)
    if [[ -n $n ]] && ((n > 0)); then
        record pass "PASS $name" "cudablame stats: $n recorded ops in a tiny torch program (${RUN_SECS} s)"
    else
        record fail "FAIL $name: no 'cudablame stats: N recorded ops' line with N > 0 on stderr (exit $RUN_RC)" \
            "the shim is not preloaded or records nothing: the differential cases prove nothing" \
            "--- last lines of $log.err:" \
            "$(tail -n 15 "$log.err" 2>/dev/null)"
    fi
}

# diff_case SCRIPT: the differential for one correct script.
diff_case() {
    local script=$1 name log problems=() details=() skip_why=""
    name=$(basename "$script")
    log=$LOGS/${name%.py}

    run_one "$log.base1" base "$PYTHON" "$script"
    local rc1=$RUN_RC s1=$RUN_SECS r1
    r1=$(results_of "$log.base1.out")
    if timed_out "$rc1"; then
        record fail "FAIL $name: timed out without cudablame (exit $rc1 after ${RUN_TIMEOUT} s)"
        return
    fi
    if ((rc1 != 0)) || [[ -z $r1 ]]; then
        local what="exit $rc1"
        [[ -z $r1 ]] && what+=", no RESULT line"
        record fail "FAIL $name: the sample itself failed without cudablame ($what); it proves nothing" \
            "--- last lines of $log.base1.err:" "$(tail -n 15 "$log.base1.err" 2>/dev/null)"
        return
    fi

    run_one "$log.base2" base "$PYTHON" "$script"
    local rc2=$RUN_RC r2
    r2=$(results_of "$log.base2.out")
    if ((rc2 != rc1)); then
        skip_why="nondeterministic: exit $rc1 then $rc2 without cudablame"
    elif [[ $r2 != "$r1" ]]; then
        skip_why="nondeterministic: RESULT lines differ between two runs without cudablame"
        details+=("run 1 without: ${r1//$'\n'/ }" "run 2 without: ${r2//$'\n'/ }")
    fi

    run_one "$log.shim" shim "$PYTHON" "$script"
    local rc3=$RUN_RC s3=$RUN_SECS r3 files=$RUN_FILES said
    r3=$(results_of "$log.shim.out")
    said=$(cudablame_lines "$log.shim.err")

    if timed_out "$rc3"; then
        problems+=("timed out with cudablame (exit $rc3 after ${RUN_TIMEOUT} s; ${s1} s without)")
    elif ((rc3 != rc1 && rc3 != rc2)); then
        problems+=("exit code with cudablame $rc3 != without $rc1")
    fi
    if [[ -n $files ]]; then
        problems+=("cudablame wrote a file for a correct program: $files (copied to $log.shim.files/)")
    fi
    if [[ -n $said ]]; then
        problems+=("cudablame printed on stderr: $(head -n 1 <<<"$said")")
        details+=("--- cudablame lines of $log.shim.err (first 5):")
        local l
        while IFS= read -r l; do details+=("| $l"); done < <(head -n 5 <<<"$said")
    fi
    if [[ -z $skip_why && $r3 != "$r1" ]]; then
        problems+=("RESULT lines with cudablame differ from those without")
        local r3s=${r3:-(none)}
        details+=("without: ${r1//$'\n'/ }" "with:    ${r3s//$'\n'/ }")
    fi

    if ((${#problems[@]} > 0)); then
        local why
        why=$(printf '%s; ' "${problems[@]}")
        record fail "FAIL $name: ${why%; }" ${details[@]+"${details[@]}"} \
            "--- last lines of $log.shim.err:" "$(tail -n 15 "$log.shim.err" 2>/dev/null)"
        return
    fi
    if [[ -n $skip_why ]]; then
        record skip "SKIP $name: $skip_why (with cudablame: same exit code, no output, no file)" \
            ${details[@]+"${details[@]}"}
        return
    fi
    # Every part of the sample skipped (a missing module): nothing was computed to compare.
    if ! grep -qv -E '^RESULT [^ ]+ skipped$' <<<"$r1"; then
        record skip "SKIP $name: every part skipped ($(grep -h ' skipped: ' "$log.base1.out" | paste -sd ';' | sed 's/;/; /g'))"
        return
    fi
    record pass "PASS $name" \
        "${r1//$'\n'/ }" \
        "exit $rc1; ${s1} s without cudablame, ${s3} s with; no cudablame output, no file"
}

# ---------------------------------------------------------------- main

main() {
    mkdir -p "$LOGS" || exit 2
    : >"$LOGS/summary.txt"

    echo "== gpu-differential: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
    fi
    "$PYTHON" - <<'PY' 2>&1
import sys
print("python", sys.version.split()[0])
for mod in ("torch", "triton", "cupy"):
    try:
        m = __import__(mod)
        extra = f" (cuda {m.version.cuda}, cuda available: {m.cuda.is_available()})" if mod == "torch" else ""
        print(mod, m.__version__ + extra)
    except Exception as e:  # noqa: BLE001
        print(mod, "not available:", type(e).__name__, e)
PY
    echo "shim: $LIB"
    [[ -f $LIB ]] && sha256sum "$LIB" 2>/dev/null
    echo "logs: $LOGS"
    echo

    local torch_ok=1
    "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1 ||
        torch_ok=0

    local script name
    local -a scripts=()
    for script in "$CASES_DIR"/*.py; do
        [[ -f $script ]] && scripts+=("$script")
    done
    ((${#scripts[@]} > 0)) || say "WARNING: no script in $CASES_DIR"

    if [[ ! -f $LIB ]]; then
        for name in shim-active "${scripts[@]##*/}"; do
            selected "$name" && record fail "FAIL $name: shim library not found at $LIB (set CUDABLAME_LIB)"
        done
    elif ((!torch_ok)); then
        for name in shim-active "${scripts[@]##*/}"; do
            selected "$name" && record skip "SKIP $name: torch with CUDA is not importable by $PYTHON"
        done
    else
        shim_active
        for script in "${scripts[@]}"; do
            selected "$(basename "$script")" && diff_case "$script"
        done
    fi

    echo
    ((PASSED + FAILED + SKIPPED > 0)) || say "WARNING: no case matched the filter: ${FILTERS[*]}"
    local summary="$PASSED passed, $FAILED failed"
    ((SKIPPED > 0)) && summary+=", $SKIPPED skipped"
    say "$summary"
    ((FAILED == 0))
}

main
