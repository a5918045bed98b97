#!/usr/bin/env bash
# gpu-check.sh: real-GPU proof for cudablame.
#
# Builds the faulty programs in cuda-samples/*.cu (static and shared cudart;
# the headers beside them, check.h and late_fault.cuh, are not samples),
# runs them and the PyTorch scripts in cuda-samples/python/*.py once without
# and once with the shim, and checks each JSON report against the EXPECT line
# in the sample's header comment.
#
# Usage (from anywhere; it works from the repo root):
#   scripts/gpu-check.sh                  # all cases
#   scripts/gpu-check.sh oob second.shared # only cases whose name contains a word
#
# Case names: <sample>.static, <sample>.shared for .cu files, <script>.py for
# Python scripts (e.g. oob_write.static, cross_entropy_oob.py).
#
# Environment:
#   CUDABLAME_LIB      shim to test        (default: $PWD/.gpu/libcudablame.so)
#   OUT                where gpu-check.log and reports.tgz go (default: /tmp)
#   BUILD_DIR          sample build + work dir (default: /tmp/cudablame-samples)
#   NVCC_ARCH          default sm_90 (H100/H200)
#   PYTHON             default python3
#   CASE_TIMEOUT       seconds per run (default 120)
#   EVERY              "some" (default: cases with an EXPECT-EVERY line), "all"
#                      or "none": which cases also run with
#                      CUDABLAME_MARKERS=every
#
# EXPECT line format (first line of the sample matching it, in // or # comment):
#   EXPECT kernel=SUB [site=SUB] error=CUDA_ERROR_X confidence=WORD[|WORD...]
#          [reporter=SUB[|SUB...]] [pysite=SUB] [hint=SUB] [assert=SUB] [stdout=same]
#          [window=N] [among=SUB]
#     confidence  one of the words given (where the driver or the timing
#              legitimately varies, list both): exact, likely, suspect, or
#              oneof: the "one of these N ops" verdict (culprit.confidence
#              likely with culprit.window and culprit.one_of > 1)
#     kernel   substring of culprit.op.kernel; for a oneof verdict, of the
#              kernel of some op of culprit.window (the op need not rank first)
#     window   culprit.one_of must be N (only checked for a oneof verdict)
#     among    substring of the kernel of some op of culprit.window (only
#              checked for a oneof verdict)
#     site     substring of some culprit.op.stack[].function
#     reporter substring of reporting_call.entry_point; SUB|SUB: any of them
#     pysite   substring of some culprit.op.python_stack[].function; a comma
#              list: each must be in some frame
#     hint     substring of culprit.hint (the one line of advice for well-known
#              loss and indexing kernels, crates/report/src/hints.rs)
#     assert   substring of culprit.device_assert.text (the device-side assert
#              line the driver printed, captured by the shim); assert=any: any
#     stdout   "same": the program's stdout must be byte for byte the same with
#              and without the shim (the driver's assert lines included)
#   A value with spaces goes in double quotes: hint="number of classes".
# A line "EXPECT-OPTIONAL" marks a case whose missing report counts as skipped.
# A line "EXPECT-EVERY key=value..." runs the case a second time with
# CUDABLAME_MARKERS=every (a progress marker after every op), as case
# <name>.every, checked against the EXPECT line with these keys replaced
# (e.g. "EXPECT-EVERY confidence=exact": with a marker after every op an
# illegal address is exact). EVERY=all runs every case that way too (the
# EXPECT line alone where a sample has no EXPECT-EVERY); EVERY=none never.
# The first run always uses the default marker setting (budgeted markers).
#
# Other header lines (first match each):
#   // BUILD-FLAGS: FLAGS...   (.cu) extra nvcc words, appended after the
#                              source, e.g. "-lcuda" for driver-API calls or
#                              "--default-stream=per-thread"
#   # REQUIRES: MODULE...      (.py) Python modules the script needs besides
#                              torch; the case is skipped when one of them is
#                              not importable (e.g. "cupy")
#
# Transparency (always checked): the exit code, and the program's own error
# (the "sample-error: cudaErrorX" token of the .cu samples, or the final
# "SomeError: ..." line of a Python traceback), must be the same with and
# without the shim. CUDA_LAUNCH_BLOCKING is unset for all runs.
#
# Output: one "PASS name" / "FAIL name: why" / "SKIP name: why" line per case,
# then exactly one summary line "N passed, M failed[, K skipped]".
# Exit status 0 iff nothing failed.
set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
REPO=$PWD
LIB=${CUDABLAME_LIB:-$REPO/.gpu/libcudablame.so}
OUT_DIR=${OUT:-/tmp}
BUILD_DIR=${BUILD_DIR:-/tmp/cudablame-samples}
NVCC_ARCH=${NVCC_ARCH:-sm_90}
PYTHON=${PYTHON:-python3}
CASE_TIMEOUT=${CASE_TIMEOUT:-120}
WORK=$BUILD_DIR/work          # reports/ and logs/ (tarred at the end)
REPORTS=$WORK/reports
LOGS=$WORK/logs

PASSED=0 FAILED=0 SKIPPED=0
FILTERS=()

# ---------------------------------------------------------------- helpers

section() { printf '\n== %s\n' "$*"; }

# selected NAME: true when no filter was given or NAME contains one of them.
selected() {
    local f
    ((${#FILTERS[@]} == 0)) && return 0
    for f in "${FILTERS[@]}"; do
        [[ $1 == *"$f"* ]] && return 0
    done
    return 1
}

# The program's own view of its error, used for the transparency check:
# the "sample-error: cudaErrorX" token the .cu samples print, or the final
# "SomeError: message" line of a Python traceback. Empty if none.
error_signature() {
    local f=$1 line
    line=$(grep -o 'sample-error: [A-Za-z0-9_]*' "$f" 2>/dev/null | tail -n 1)
    if [[ -z $line ]]; then
        line=$(grep -E '^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception): ' "$f" 2>/dev/null | tail -n 1)
    fi
    # The note cudablame appends to the reported error's string (CUDABLAME_ERROR_STRING) is
    # the one intended difference: compare the rest.
    line=$(sed -E 's/ \[cudablame: [^]]*\]//' <<<"$line")
    printf '%s' "$line"
}

last_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1; }

# header_words SOURCE COMMENT KEY: the words after "KEY:" on the first line
# of SOURCE that reads "COMMENT KEY: words" (COMMENT is // or #).
header_words() {
    local re="^[[:space:]]*$2[[:space:]]*$3:[[:space:]]*"
    sed -n -E "\|$re|{s|$re||;p;q;}" "$1"
}

record() {  # record STATUS LINE
    echo "$2"
    case $1 in
        pass) PASSED=$((PASSED + 1)) ;;
        skip) SKIPPED=$((SKIPPED + 1)) ;;
        *) FAILED=$((FAILED + 1)) ;;
    esac
}

# check_report NAME SOURCE REPORT RC_BASE RC_SHIM SIG_BASE SIG_SHIM
# Prints "PASS NAME" / "FAIL NAME: ..." / "SKIP NAME: ..." (plus indented
# detail lines) and exits 0 / 1 / 2 accordingly.
check_report() {
    "$PYTHON" - "$@" <<'PY'
import json, os, re, sys

name, source, report, rc_base, rc_shim, sig_base, sig_shim = sys.argv[1:8]
out_base, out_shim = (sys.argv[8:10] + ["", ""])[:2]
mode = (sys.argv[10:11] + ["default"])[0]
rc_base, rc_shim = int(rc_base), int(rc_shim)

def words(text):
    # key=value words; a value may be "double quoted" to hold spaces.
    return {k: v[1:-1] if v.startswith('"') else v
            for k, v in re.findall(r'(?:^|\s)(\w+)=("[^"]*"|\S+)', text)}

expect, every, optional = None, None, False
with open(source, encoding="utf-8", errors="replace") as f:
    for line in f:
        if re.match(r"\s*(//|#)\s*EXPECT-OPTIONAL\b", line):
            optional = True
            continue
        m = re.match(r"\s*(//|#)\s*EXPECT-EVERY\s+(.*)$", line)
        if m:
            every = every if every is not None else words(m.group(2))
            continue
        m = re.match(r"\s*(//|#)\s*EXPECT\s+(.*)$", line)
        if m and expect is None:
            expect = words(m.group(2))
if expect is not None and mode == "every" and every:
    expect = {**expect, **every}

def finish(status, why=None, details=()):
    word = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}[status]
    print(f"{word} {name}" + (f": {why}" if why else ""))
    for d in details:
        print(f"    {d}")
    sys.exit({"pass": 0, "fail": 1, "skip": 2}[status])

if expect is None:
    finish("fail", f"no EXPECT line in {source}")

problems = []

# Transparency: the shim must not change what the program sees.
if rc_shim in (124, 137):
    finish("fail", f"timed out with the shim (exit {rc_shim}; without the shim: exit {rc_base})")
if rc_shim != rc_base:
    problems.append(f"transparency: exit code with shim {rc_shim} != without shim {rc_base}")
if sig_base and sig_shim != sig_base:
    problems.append(f"transparency: program error with shim {sig_shim!r} != without shim {sig_base!r}")

if not os.path.exists(report):
    if problems:
        finish("fail", "; ".join(problems + ["no report written"]))
    if optional:
        finish("skip", f"no report written (EXPECT-OPTIONAL; program exit {rc_shim}, {sig_shim or 'no error line'})")
    if rc_base == 0:
        finish("fail", "no report, and the sample did not fail even without the shim (exit 0)")
    finish("fail", f"no report written at {report}")

try:
    with open(report, encoding="utf-8") as f:
        r = json.load(f)
except Exception as e:  # noqa: BLE001
    finish("fail", "; ".join(problems + [f"report is not valid JSON: {e}"]))

def get(obj, *path):
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj

def functions(frames):
    if not isinstance(frames, list):
        return []
    return [f.get("function") for f in frames if isinstance(f, dict) and f.get("function")]

def short(s, n=160):
    s = str(s)
    return s if len(s) <= n else s[: n - 3] + "..."

if not isinstance(r, dict):
    finish("fail", "; ".join(problems + [f"report is not a JSON object: {short(r)}"]))
schema = r.get("schema")
if schema != "cudablame.report/1":
    problems.append(f"schema: expected 'cudablame.report/1', got {schema!r}")

err_name = get(r, "error", "name")
culprit_op = get(r, "culprit", "op")
confidence = get(r, "culprit", "confidence")
kernel = get(culprit_op, "kernel")
window = get(r, "culprit", "window") or []
one_of = get(r, "culprit", "one_of") or 0
is_oneof = confidence == "likely" and one_of > 1 and bool(window)
window_kernels = [w.get("kernel") or "" for w in window if isinstance(w, dict)]

def confidence_ok(want):
    for alt in want.split("|"):
        if alt == "oneof" and is_oneof:
            return True
        if alt == confidence:
            return True
    return False
stack_fns = functions(get(culprit_op, "stack"))
py_fns = functions(get(culprit_op, "python_stack"))
entry = get(r, "reporting_call", "entry_point")
hint = get(r, "culprit", "hint")

if "error" in expect and err_name != expect["error"]:
    problems.append(f"error.name: expected {expect['error']}, got {err_name!r}")
got_confidence = f"oneof (likely, one of {one_of})" if is_oneof else repr(confidence)
if "confidence" in expect and not confidence_ok(expect["confidence"]):
    problems.append(f"culprit.confidence: expected {expect['confidence']}, got {got_confidence}")
if "kernel" in expect:
    if is_oneof:
        if not any(expect["kernel"] in k for k in window_kernels + [kernel or ""]):
            problems.append(f"culprit.window: no op's kernel contains {expect['kernel']!r} "
                            f"(kernels: {short(window_kernels[:8], 300)})")
    elif expect["kernel"] not in (kernel or ""):
        problems.append(f"culprit.op.kernel: expected to contain {expect['kernel']!r}, got {short(kernel)!r}")
if is_oneof and "window" in expect and str(one_of) != expect["window"]:
    problems.append(f"culprit.one_of: expected {expect['window']}, got {one_of}")
if is_oneof and "among" in expect and not any(expect["among"] in k for k in window_kernels):
    problems.append(f"culprit.window: no op's kernel contains {expect['among']!r} "
                    f"(kernels: {short(window_kernels[:8], 300)})")
if "site" in expect and not any(expect["site"] in fn for fn in stack_fns):
    problems.append(f"culprit.op.stack: no function containing {expect['site']!r} "
                    f"(functions: {short(stack_fns[:8], 300)})")
for want in (expect["pysite"].split(",") if "pysite" in expect else []):
    if not any(want in fn for fn in py_fns):
        problems.append(f"culprit.op.python_stack: no function containing {want!r} "
                        f"(functions: {short(py_fns[:8], 300)})")
if "reporter" in expect and not any(alt in (entry or "") for alt in expect["reporter"].split("|")):
    problems.append(f"reporting_call.entry_point: expected to contain {expect['reporter']!r}, got {entry!r}")
if "hint" in expect and expect["hint"] not in (hint or ""):
    problems.append(f"culprit.hint: expected to contain {expect['hint']!r}, got {short(hint)!r}")
dev_assert = get(r, "culprit", "device_assert")
assert_text = get(dev_assert, "text") or ""
if "assert" in expect and not (assert_text if expect["assert"] == "any" else expect["assert"] in assert_text):
    problems.append(f"culprit.device_assert.text: expected to contain {expect['assert']!r}, got {short(assert_text)!r}")
if expect.get("stdout") == "same":
    try:
        same = open(out_base, "rb").read() == open(out_shim, "rb").read()
    except OSError as e:
        same = False
        problems.append(f"stdout: cannot compare: {e}")
    if not same:
        problems.append(f"transparency: stdout differs with the shim ({out_base} vs {out_shim})")

site_fn = next((fn for fn in stack_fns if expect.get("site") and expect["site"] in fn), None)
details = [
    f"error: {err_name} (code {get(r, 'error', 'code')}), reported by {entry} "
    f"on stream {get(r, 'reporting_call', 'stream')}",
    f"culprit: [{got_confidence}] seq {get(culprit_op, 'seq')} {short(kernel)} "
    f"grid {get(culprit_op, 'grid')} block {get(culprit_op, 'block')} stream {get(culprit_op, 'stream')}",
    f"culprit site: {site_fn or short(stack_fns[:4], 200)}"
    + (f"; python: {short(py_fns[:6], 200)}" if py_fns else ""),
    f"reason: {short(get(r, 'culprit', 'reason'), 200)}",
    f"suspects: {len(r.get('suspects') or [])}, streams: {len(r.get('streams') or [])}; "
    f"exit {rc_base} without shim, {rc_shim} with",
]
if is_oneof:
    details.insert(2, "window: " + short(", ".join(
        f"#{w.get('seq')} {w.get('kernel') or ('(%s unknown)' % w.get('unknown_ops') if w.get('unknown_ops') else '?')}"
        for w in window[:12]), 300))
if hint or "hint" in expect:
    details.insert(4, f"hint: {short(hint, 200)}")
if dev_assert:
    details.insert(4, f"assert: {short(assert_text, 200)} (matches culprit: {get(dev_assert, 'matches_culprit')}, "
                      f"{get(dev_assert, 'lines')} lines)")
if problems:
    finish("fail", "; ".join(problems), details)
finish("pass", None, details)
PY
}

# run_case NAME SOURCE COMMAND...
# Runs COMMAND without and with the shim and checks the report; shared by
# the .cu binaries and the Python scripts. Then, when the sample asks for it
# (EXPECT-EVERY, or EVERY=all), once more as NAME.every with
# CUDABLAME_MARKERS=every.
run_case() {
    local name=$1 source=$2
    shift 2
    run_mode default "$name" "$source" "$@"
    case ${EVERY:-some} in
        all) run_mode every "$name.every" "$source" "$@" ;;
        none) ;;
        *) grep -qE '^[[:space:]]*(//|#)[[:space:]]*EXPECT-EVERY[[:space:]]' "$source" &&
            run_mode every "$name.every" "$source" "$@" ;;
    esac
}

# hang_state PID: what each thread of a hung process waits in: name, kernel wait channel, the
# system call it is in (number and first arguments) and the file its user-space pc lies in
# (from /proc/PID/maps), then gdb's backtraces where gdb exists (the GPU machine has none).
hang_state() {
    python3 - "$1" <<'PY'
import glob, os, sys
pid = sys.argv[1]
def read(p):
    try:
        return open(p).read().strip()
    except OSError:
        return "?"
maps = []
for line in read(f"/proc/{pid}/maps").splitlines():
    f = line.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    maps.append((lo, hi, f[5] if len(f) > 5 else "[anon]", "x" in f[1]))
def where(pc):
    try:
        a = int(pc, 16)
    except ValueError:
        return "?"
    for lo, hi, name, _ in maps:
        if lo <= a < hi:
            return f"{os.path.basename(name)}+{a - lo:#x}"
    return "?"
def scan(sp):
    """Words on the thread's stack (16 KiB from sp) that point into executable code: return
    addresses among them, innermost first (a stack scan, with false positives; module offsets
    for addr2line against the unstripped build)."""
    try:
        with open(f"/proc/{pid}/mem", "rb") as m:
            m.seek(int(sp, 16))
            data = m.read(16384)
    except (OSError, ValueError, OverflowError) as e:
        return [f"(stack unreadable: {e})"]
    out = []
    for i in range(0, len(data) - 7, 8):
        w = int.from_bytes(data[i:i + 8], "little")
        for lo, hi, name, x in maps:
            if x and lo <= w < hi:
                out.append(f"{os.path.basename(name)}+{w - lo:#x}")
                break
        if len(out) >= 24:
            break
    return out
print(f"threads of pid {pid} ({read(f'/proc/{pid}/cmdline').replace(chr(0), ' ')[:120]}):")
for task in sorted(glob.glob(f"/proc/{pid}/task/*")):
    sc = read(f"{task}/syscall").split()
    print(f"  tid {os.path.basename(task)} {read(task + '/comm'):16} wchan={read(task + '/wchan'):22} "
          f"syscall={' '.join(sc[:3])} pc={sc[-1] if sc else '?'} in {where(sc[-1]) if sc else '?'}")
    if sc and sc[0] == "202":
        print(f"      futex word {sc[1]} in {where(sc[1])}")
    if len(sc) > 2:
        print("      stack scan: " + " ".join(scan(sc[-2])))
PY
    if command -v gdb >/dev/null 2>&1; then
        timeout 60 gdb -batch -p "$1" -ex "thread apply all bt 30" 2>&1 | grep -E '^(#|Thread)'
    fi
}

# run_watched OUT ERR COMMAND...: COMMAND with stdout in OUT and stderr in ERR, killed after
# CASE_TIMEOUT s like `timeout -k 10` (status 124); a hung run first leaves its threads' states
# in ERR.hang (hang_state), so that a hang seen once can be read afterwards.
run_watched() {
    local out=$1 err=$2 pid ticks=0
    shift 2
    "$@" >"$out" 2>"$err" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null && ((ticks < CASE_TIMEOUT * 5)); do
        sleep 0.2
        ticks=$((ticks + 1))
    done
    if kill -0 "$pid" 2>/dev/null; then
        hang_state "$pid" >"$err.hang" 2>&1
        kill -TERM "$pid" 2>/dev/null
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null && sleep 1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 124
    fi
    wait "$pid"
}

# run_mode MODE NAME SOURCE COMMAND...: one check, with the default markers
# (MODE default) or CUDABLAME_MARKERS=every (MODE every).
run_mode() {
    local mode=$1 name=$2 source=$3
    shift 3
    local markers=()
    [[ $mode == every ]] && markers=(CUDABLAME_MARKERS=every)
    local report=$REPORTS/$name.json
    local base_out=$LOGS/$name.base.out base_err=$LOGS/$name.base.err
    local shim_out=$LOGS/$name.shim.out shim_err=$LOGS/$name.shim.err
    local rc_base rc_shim rc_check out sig_base sig_shim

    rm -f "$report"
    timeout -k 10 "$CASE_TIMEOUT" "$@" >"$base_out" 2>"$base_err"
    rc_base=$?
    sig_base=$(error_signature "$base_err")
    echo "-- $name: without shim: exit $rc_base: ${sig_base:-$(last_line "$base_err")}"

    rm -f "$shim_err.hang"
    run_watched "$shim_out" "$shim_err" \
        env ${markers[@]+"${markers[@]}"} LD_PRELOAD="$LIB" CUDABLAME_REPORT="$report" "$@"
    rc_shim=$?
    sig_shim=$(error_signature "$shim_err")
    echo "-- $name: with shim:    exit $rc_shim: ${sig_shim:-$(last_line "$shim_err")}"

    out=$(check_report "$name" "$source" "$report" "$rc_base" "$rc_shim" \
        "$sig_base" "$sig_shim" "$base_out" "$shim_out" "$mode" 2>&1)
    rc_check=$?
    case $rc_check in
        0) record pass "$out" ;;
        2) record skip "$out" ;;
        *)
            [[ -n $out ]] || out="FAIL $name: checker crashed (exit $rc_check)"
            record fail "$out"
            echo "    --- first 40 lines of stderr with the shim ($shim_err):"
            head -n 40 "$shim_err" | sed 's/^/    | /'
            if [[ -f $shim_err.hang ]]; then
                echo "    --- the hung run's threads ($shim_err.hang):"
                head -n 80 "$shim_err.hang" | sed 's/^/    | /'
            fi
            ;;
    esac
}

fail_case() {  # fail_case NAME WHY [LOGFILE]
    record fail "FAIL $1: $2"
    if [[ -n ${3:-} && -f $3 ]]; then
        echo "    --- last 40 lines of $3:"
        tail -n 40 "$3" | sed 's/^/    | /'
    fi
}

find_nvcc() {
    if command -v nvcc >/dev/null 2>&1; then
        command -v nvcc
    elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
        echo /usr/local/cuda/bin/nvcc
    fi
}

# ---------------------------------------------------------------- main

main() {
    FILTERS=("$@")
    mkdir -p "$OUT_DIR"
    exec > >(tee "$OUT_DIR/gpu-check.log") 2>&1
    local tee_pid=$!

    # Never let an inherited setting change where errors surface.
    unset CUDA_LAUNCH_BLOCKING CUDABLAME_REPORT CUDABLAME_MARKERS LD_PRELOAD

    section "versions"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(hostname)"
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
    else
        echo "nvidia-smi: not found"
    fi
    local nvcc
    nvcc=$(find_nvcc)
    if [[ -n $nvcc ]]; then
        echo "nvcc: $nvcc"
        "$nvcc" --version | tail -n 2
    else
        echo "nvcc: not found (PATH, /usr/local/cuda/bin)"
    fi
    "$PYTHON" - <<'PY' 2>&1
import sys
print("python", sys.version.split()[0])
for mod in ("torch", "triton"):
    try:
        m = __import__(mod)
        extra = f" (cuda {m.version.cuda}, cuda available: {m.cuda.is_available()})" if mod == "torch" else ""
        print(mod, m.__version__ + extra)
    except Exception as e:  # noqa: BLE001
        print(mod, "not available:", e)
PY
    echo "shim: $LIB"
    if [[ -f $LIB ]]; then
        ls -l "$LIB"
        sha256sum "$LIB" 2>/dev/null
    else
        echo "WARNING: shim library not found; every case will fail with 'no report'"
    fi
    echo "filters: ${FILTERS[*]:-(none)}"

    rm -rf "$WORK"
    mkdir -p "$REPORTS" "$LOGS"

    # ---- build (in parallel; all static and shared variants at once)
    section "build ($NVCC_ARCH, into $BUILD_DIR)"
    local src base variant bin flags
    local -a cu_sources=()
    for src in cuda-samples/*.cu; do
        [[ -f $src ]] || continue
        base=$(basename "$src" .cu)
        if selected "$base.static" || selected "$base.shared"; then
            cu_sources+=("$src")
        fi
    done
    if [[ -n $nvcc ]]; then
        local -a build_pids=() extra=()
        for src in "${cu_sources[@]}"; do
            base=$(basename "$src" .cu)
            read -r -a extra <<<"$(header_words "$src" // BUILD-FLAGS)"
            for variant in static shared; do
                selected "$base.$variant" || continue
                bin=$BUILD_DIR/$base.$variant
                rm -f "$bin"
                # -g: host debug info so the shim can show file:line for the
                # launch sites (it does not change device code).
                "$nvcc" -O2 -g -arch="$NVCC_ARCH" -cudart "$variant" -o "$bin" "$src" \
                    ${extra[@]+"${extra[@]}"} >"$LOGS/$base.$variant.build.log" 2>&1 &
                build_pids+=($!)
            done
        done
        # Wait for the builds by pid: a bare `wait` would also wait for the
        # tee process substitution (bash >= 5.1) and hang.
        ((${#build_pids[@]} == 0)) || wait "${build_pids[@]}"
        for src in "${cu_sources[@]}"; do
            base=$(basename "$src" .cu)
            for variant in static shared; do
                selected "$base.$variant" || continue
                if [[ -x $BUILD_DIR/$base.$variant ]]; then
                    flags=$(header_words "$src" // BUILD-FLAGS)
                    echo "built $base.$variant${flags:+ (extra flags: $flags)}"
                else
                    echo "BUILD FAILED $base.$variant (see logs/$base.$variant.build.log)"
                fi
            done
        done
    fi

    # ---- CUDA C++ samples
    section "CUDA C++ samples"
    for src in "${cu_sources[@]}"; do
        base=$(basename "$src" .cu)
        for variant in static shared; do
            local name=$base.$variant
            selected "$name" || continue
            bin=$BUILD_DIR/$name
            if [[ -z $nvcc ]]; then
                fail_case "$name" "nvcc not found, cannot build"
            elif [[ ! -x $bin ]]; then
                fail_case "$name" "build failed" "$LOGS/$name.build.log"
            else
                run_case "$name" "$src" "$bin"
            fi
        done
    done

    # ---- PyTorch scripts
    section "PyTorch scripts"
    local torch_ok=1
    "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1 || torch_ok=0
    for src in cuda-samples/python/*.py; do
        [[ -f $src ]] || continue
        local name
        name=$(basename "$src")
        selected "$name" || continue
        local -a requires=()
        local module missing=""
        read -r -a requires <<<"$(header_words "$src" '#' REQUIRES)"
        for module in ${requires[@]+"${requires[@]}"}; do
            "$PYTHON" -c "import $module" >/dev/null 2>&1 || missing+=" $module"
        done
        if ((!torch_ok)); then
            record skip "SKIP $name: torch with CUDA is not importable by $PYTHON"
        elif [[ -n $missing ]]; then
            record skip "SKIP $name: needs${missing}, not importable by $PYTHON"
        else
            run_case "$name" "$src" "$PYTHON" "$src"
        fi
    done

    # ---- summary and artifacts
    tar -czf "$OUT_DIR/reports.tgz" -C "$WORK" reports logs 2>/dev/null ||
        echo "WARNING: could not write $OUT_DIR/reports.tgz"
    echo
    ((PASSED + FAILED + SKIPPED > 0)) || echo "WARNING: no case matched the filter: ${FILTERS[*]}"
    local summary="$PASSED passed, $FAILED failed"
    ((SKIPPED > 0)) && summary+=", $SKIPPED skipped"
    echo "$summary"

    # Let tee drain before exiting so the log file is complete.
    exec >&- 2>&-
    wait "$tee_pid" 2>/dev/null
    ((FAILED == 0))
}

# Only run when executed, so the helpers can be sourced for testing.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    main "$@"
fi
