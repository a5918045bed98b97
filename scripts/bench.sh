#!/usr/bin/env bash
# Benchmark (GPU machine; a benchmark, not a test) for issue 5. Every measured configuration runs
# in rounds (round r runs each configuration once, starting at configuration r: rotating order, so
# drift and warm-up spread evenly), each run pinned to one CPU (taskset -c $BENCH_CPU, when taskset
# exists), and the tables give median, min and max over the rounds and the median's difference to
# the first row. Parts, in the order `all` runs them (expected time on an H200 with the defaults):
#   gpu        gpu_probe (issue 21): GPU µs per op of N=400 kernels queued behind a ~50 ms spin
#              kernel (CUDA events around them), tiny and 1M-element kernels, legacy and
#              non-blocking streams; and the queue depth behind a blocked stream (launches before
#              the host waits); no shim, default, CUDABLAME_MARKERS=every and =off x 7 rounds (~60 s)
#   launch     launch loop, host mode: host µs per empty-kernel launch while the stream is blocked
#              (pure enqueue cost); 7 configurations x 7 rounds x 100,000 launches, the last
#              "cudablame paused": its pass-through alone (cudablame_pause(1))           (~70 s)
#   probe      launch_loop probe: host µs of a launch alone and of a launch + one candidate
#              progress signal (cuStreamWriteValue64/32, cuEventRecord, ...), no shim      (~5 s)
#   graph      graph_markers: µs per CUDA-graph replay without and with a progress-marker node
#              after each kernel, same results?, and whether the marker names a faulting node
#              exactly (an experiment for markers inside graphs; no shim)                (~5 s)
#   train      PyTorch training steps in one process, ms per step: a small GPT, tiny, the small
#              GPT captured into one CUDA graph (replays) and `big` (GPT-2 small's shape,
#              batch 32); goal 4, from the rounds' pairs of processes and, in each cudablame
#              run, from blocks of steps recording vs paused (train_step.py --paired;
#              BENCH_PAIRED_BLOCK). Each eager step is judged GPU-bound (at most +2%) or
#              host-bound (+4%) by its measured GPU share (train_step.py --count: the step's
#              summed GPU activity over its ms, no shim; 0.9 or more: GPU-bound). Each step's
#              last goal line is its verdict: the same process's where measured (it cancels
#              the host's speed between processes), else the pairs of processes'      (~235 s)
#   memory     resident memory after 1M and after all of BENCH_MEM_N back-to-back launches,
#              without and with cudablame (5M by default: 10M does not fit the budget)    (~40 s)
#   latency    report build time (build_ns: faulting call to report written, symbolization
#              included) for cuda-samples/oob_write.cu and python/indexing_oob.py          (~15 s)
#   stats      one launch loop with CUDABLAME_STATS=on and BENCH_STATS_REPS GPT runs with
#              CUDABLAME_STATS=total (two more =on for the phases), each --paired: goal 2 from
#              the runs' median of the steady ops' own time (after the first pause)     (~110 s)
#   sanitizer  compute-sanitizer memcheck on BENCH_SAN_STEPS GPT steps, ms per step, as a
#              reference; killed after BENCH_SAN_TIMEOUT s ("timeout"). Last, so that a slow
#              sanitizer cannot cost the other results                         (~30-120 s)
# plus ~15 s of nvcc builds: about 6-7 minutes for `all`; BENCH_QUICK=1 runs the parts that
# print goals 1-4 (gpu launch train stats) with 40 steps per training run (about 4 minutes;
# scripts/gpu-calls/bench.sh's 20 steps took 351 s on an H100 before BENCH_PAIRED_MS, which adds
# about 25 s).
# The last section prints goals 1-4 of issue 21, each "met" or "NOT met" with its numbers.
#
# Usage: scripts/bench.sh [gpu|launch|probe|train|memory|latency|stats|sanitizer|all]...  (default all)
# Environment (defaults):
#   CUDABLAME_LIB      the shim ($PWD/.gpu/libcudablame.so)
#   BENCH_QUICK        1: only gpu, launch, train and stats, 40 training steps per run (0)
#   BENCH_EXTRA        more cudablame configurations for the gpu, launch and train tables,
#                      "label|VAR=value ...;label|..." (to compare candidate settings side by side;
#                      "label|VAR=value ...|ARGS" also passes ARGS to that configuration's program)
#   BENCH_GPU_N        kernels per gpu_probe measurement (400); BENCH_GPU_REPS rounds (7)
#   BENCH_N            launches per launch-loop run (100000)
#   BENCH_REPS         rounds of the launch loop (7)
#   BENCH_MODES        launch loop modes, "host" and/or "stream" (host)
#   BENCH_TRAIN_REPS   rounds of the training step (7)
#   BENCH_STATS_REPS   GPT runs with CUDABLAME_STATS=total; goal 2 takes their median (7)
#   BENCH_STEPS        timed steps per training run (100; 40 with BENCH_QUICK=1)
#   BENCH_PAIRED_LAUNCH 1: the launch part also runs BENCH_REPS `launch_loop N paired` runs under
#                      the shim (recording vs paused batches in one process) for goal 2 (1)
#   BENCH_PAIRED_BLOCK steps per block of the cudablame training runs' same-process comparison,
#                      recording vs paused, ABBA (5; those runs then time 2 x BENCH_STEPS more
#                      steps per size); 0: not run
#   BENCH_PAIRED_MS    at least this many ms of block pairs in each of those runs' comparison,
#                      per size (train_step.py --paired-ms; at most 200 pairs) (1500)
#   BENCH_TRAIN_FULL   1: also cudablame with CUDABLAME_STACK=off, CUDABLAME_PYTHON=off and
#                      CUDABLAME_MARKERS=off in the training table (0)
#   BENCH_PROBE_N      calls per probe item (25600)
#   BENCH_MEM_N        launches of the memory run (5000000)
#   BENCH_SAN_STEPS    steps under compute-sanitizer (3); BENCH_SAN_TIMEOUT its limit in s (120),
#                      cut so that the script ends by BENCH_DEADLINE s after its start (330)
#   BENCH_RUN_TIMEOUT  limit of one measured run in s (120)
#   BENCH_CPU          the CPU every measured run is pinned to (2)
#   BUILD_DIR          build and temp dir (/tmp/cudablame-bench); NVCC_ARCH (sm_90); PYTHON (python3)
set -u
cd "$(dirname "$0")/.." || exit 2

LIB=${CUDABLAME_LIB:-$PWD/.gpu/libcudablame.so}
N=${BENCH_N:-100000}
REPS=${BENCH_REPS:-7}
MODES=${BENCH_MODES:-host}
TRAIN_REPS=${BENCH_TRAIN_REPS:-7}
STEPS=${BENCH_STEPS:-100}
PROBE_N=${BENCH_PROBE_N:-25600}
MEM_N=${BENCH_MEM_N:-5000000}
GPU_N=${BENCH_GPU_N:-400}
GPU_REPS=${BENCH_GPU_REPS:-7}
STATS_REPS=${BENCH_STATS_REPS:-7}
# Steps per block of the stats runs' --paired (their steady ops are the recording blocks').
PAIRED_STATS=5
SAN_STEPS=${BENCH_SAN_STEPS:-3}
SAN_TIMEOUT=${BENCH_SAN_TIMEOUT:-120}
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-120}
DEADLINE=${BENCH_DEADLINE:-330}
CPU=${BENCH_CPU:-2}
BUILD=${BUILD_DIR:-/tmp/cudablame-bench}
ARCH=${NVCC_ARCH:-sm_90}
PYTHON=${PYTHON:-python3}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
BIN=$BUILD/launch_loop
S="LD_PRELOAD=$LIB CUDABLAME_REPORT=off"
# Nothing from the caller's environment may change a run: no preload, no blocking launches, no
# cudablame variable (CUDABLAME_LIB included: the shim would warn about it).
unset LD_PRELOAD CUDA_LAUNCH_BLOCKING
while read -r v; do unset "$v"; done < <(compgen -e | grep '^CUDABLAME_')

ALL=(gpu launch probe graph train memory latency stats sanitizer)
PARTS=("$@")
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  ((${#PARTS[@]})) || PARTS=(gpu launch train stats)
  STEPS=${BENCH_STEPS:-40}
fi
((${#PARTS[@]})) || PARTS=(all)
# extra "label|VAR=value ..." configurations (BENCH_EXTRA), each run under the shim.
EXTRA=()
if [[ -n ${BENCH_EXTRA:-} ]]; then
  IFS=';' read -r -a extra_raw <<<"$BENCH_EXTRA"
  for e in "${extra_raw[@]}"; do
    [[ $e == *"|"* ]] && EXTRA+=("${e%%|*}|$S ${e#*|}")
  done
fi
for p in "${PARTS[@]}"; do
  case " all ${ALL[*]} " in
    *" $p "*) ;;
    *) echo "usage: scripts/bench.sh [$(IFS='|'; echo "${ALL[*]}")|all]... (N, REPS: BENCH_N, BENCH_REPS)" >&2
       exit 2 ;;
  esac
done
wants() { [[ " ${PARTS[*]} " == *" $1 "* || " ${PARTS[*]} " == *" all "* ]]; }

PIN=()
PIN_NOTE="not pinned (no taskset)"
if command -v taskset >/dev/null 2>&1; then
  if ! taskset -c "$CPU" true 2>/dev/null; then
    # Not an allowed CPU here: the last of those allowed instead (CPU 0 often takes interrupts).
    allowed=$(taskset -pc $$ 2>/dev/null | sed 's/.*: *//')
    CPU=${allowed##*[-,]}
  fi
  if [[ -n $CPU ]] && taskset -c "$CPU" true 2>/dev/null; then
    PIN=(taskset -c "$CPU")
    PIN_NOTE="each measured run pinned to CPU $CPU (taskset; BENCH_CPU=${BENCH_CPU:-2})"
  else
    PIN_NOTE="not pinned (taskset -c ${BENCH_CPU:-2} refused)"
  fi
fi

# ------------------------------------------------------------------------------------ helpers

# run_one "VAR=value ..." CMD...: one pinned run with those variables, stdout and stderr together,
# and a last line "[exit status N]" when N is not 0 (124: killed after BENCH_RUN_TIMEOUT s).
run_one() {
  local envs=$1 rc
  shift
  # shellcheck disable=SC2086  # envs is a list of VAR=value words
  timeout -k 5 "$RUN_TIMEOUT" ${PIN[@]+"${PIN[@]}"} env $envs "$@" 2>&1
  rc=$?
  ((rc == 0)) || echo "[exit status $rc]"
}

# value KEY TEXT: the first number written as KEY=<number> in TEXT (empty if none).
value() { grep -oE "(^|[^A-Za-z0-9_])$1=-?[0-9.]+" <<<"$2" | head -1 | sed 's/.*=//'; }

# measure CONFIGS ROUNDS CMD...: CONFIGS names an array of "label|VAR=value ..." entries (or
# "label|VAR=value ...|ARGS": ARGS, split at spaces, follow CMD in that configuration's runs only);
# runs each configuration once per round, round r starting at configuration r; run i of round r
# leaves its output in OUT_OF[i,r].
declare -A OUT_OF
# The medians of the last table, by configuration index; and the goal lines printed at the end.
declare -A TABLE_MED
GOALS=()
goal() { GOALS+=("$1"); }
# pct A B: B's difference to A in percent.
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%+.1f%%", 100 * (b - a) / a; else print "?" }'; }
# order_stats: numbers on stdin, one per line -> "median min max count lo hi", where lo and hi
# are the second smallest and second largest of 5 or more numbers (else min and max): they bound
# the median's distribution-free confidence interval (87.5% for 7 numbers: the median lies
# between them unless 6 of the 7 fall on one side of it). "? ? ? 0 ? ?" for no number.
order_stats() {
  sort -g | awk '{ v[NR] = $1 }
    END { if (!NR) { print "? ? ? 0 ? ?"; exit }
          m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          print m, v[1], v[NR], NR, (NR >= 5 ? v[2] : v[1]), (NR >= 5 ? v[NR - 1] : v[NR]) }'
}

# signed_stats DIGITS: order_stats of the numbers on stdin, signed, DIGITS decimals (the count
# as is; "? ? ? 0 ? ?" when there are none).
signed_stats() {
  order_stats | awk -v d="$1" '$4 == 0 { print; next }
    { f = "%+." d "f"; printf f " " f " " f " %d " f " " f "\n", $1, $2, $3, $4, $5, $6 }'
}

# paired KEY: per round r of the last measure, KEY of configuration 1 against configuration 0
# in percent; prints order_stats of those (signed, one decimal): "median min max rounds lo hi".
paired() {
  local r a b
  for ((r = 0; r < ${MEASURED_ROUNDS:-0}; r++)); do
    a=$(value "$1" "${OUT_OF[0,$r]-}") b=$(value "$1" "${OUT_OF[1,$r]-}")
    [[ -n $a && -n $b ]] && awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.4f\n", 100 * (b - a) / a }'
  done | signed_stats 1
}
measure() {
  local -n cfgs=$1
  local rounds=$2 n r k i spec args
  shift 2
  n=${#cfgs[@]}
  OUT_OF=()
  MEASURED_ROUNDS=$rounds
  for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < n; k++)); do
      i=$(((r + k) % n))
      spec=${cfgs[i]#*|} args=()
      [[ $spec == *"|"* ]] && read -r -a args <<<"${spec#*|}"
      OUT_OF[$i,$r]=$(run_one "${spec%%|*}" "$@" ${args[@]+"${args[@]}"})
    done
  done
}

# table CONFIGS ROUNDS KEY UNIT TITLE [NOTE_KEY]: one row per configuration of the last measure:
# median, min and max of KEY over the rounds, the median minus the first row's (and in %); with
# NOTE_KEY, its sum over the rounds when not 0. A run without KEY counts as failed: the row says
# so, with the end of that run's output.
table() {
  local -n cfgs=$1
  local rounds=$2 key=$3 unit=$4 title=$5 note_key=${6:-} i r v base="" vals stats med note bad
  printf '\n%s\n' "$title"
  printf '%-52s %9s %9s %9s  %s\n' "configuration" "median $unit" "min" "max" "median vs first row"
  for i in "${!cfgs[@]}"; do
    vals=() note="" bad=""
    local notes=0
    for ((r = 0; r < rounds; r++)); do
      v=$(value "$key" "${OUT_OF[$i,$r]-}")
      if [[ -n $v ]]; then
        vals+=("$v")
      else
        bad=$(tail -n 2 <<<"${OUT_OF[$i,$r]-}" | tr '\n' ' ' | cut -c1-160)
      fi
      if [[ -n $note_key ]]; then
        v=$(value "$note_key" "${OUT_OF[$i,$r]-}")
        notes=$((notes + ${v:-0}))
      fi
    done
    ((notes)) && note="  [$note_key=$notes]"
    if ((${#vals[@]} == 0)); then
      printf '%-52s %9s %9s %9s  all runs failed: %s\n' "${cfgs[i]%%|*}" "-" "-" "-" "$bad"
      continue
    fi
    stats=$(printf '%s\n' "${vals[@]}" | order_stats | awk '{ printf "%.3f %.3f %.3f", $1, $2, $3 }')
    read -r med _ _ <<<"$stats"
    TABLE_MED[$i]=$med
    ((i == 0)) && base=$med
    # shellcheck disable=SC2086  # stats is the three numbers median, min, max
    printf '%-52s %9.3f %9.3f %9.3f  %s%s\n' "${cfgs[i]%%|*}" $stats \
      "$(awk -v m="$med" -v b="$base" -v first=$((i == 0)) 'BEGIN {
           if (first) printf "(reference)"; else if (b > 0) printf "%+.3f (%+.0f%%)", m - b, 100 * (m - b) / b }')" \
      "$note"
    ((${#vals[@]} < rounds)) && printf '%52s %d of %d runs failed, e.g.: %s\n' "" \
      $((rounds - ${#vals[@]})) "$rounds" "$bad"
  done
}

part_start() { PART_T0=$SECONDS; printf '\n==== %s\n' "$1"; }
part_end() { printf '[%s: %d s]\n' "$1" $((SECONDS - PART_T0)); }

need_lib() {
  [[ -f $LIB ]] && return 0
  echo "error: the shim $LIB does not exist (build it, or set CUDABLAME_LIB)" >&2
  exit 1
}

# ------------------------------------------------------------------------------------- header

T0=$SECONDS
echo "cudablame bench, $(date '+%Y-%m-%d %H:%M:%S %Z'), parts: ${PARTS[*]}"
echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)"
echo "nvcc: $("$NVCC" --version 2>/dev/null | grep -o 'release [^,]*, V[0-9.]*' || echo "not found ($NVCC)")"
echo "python: $("$PYTHON" -c 'import platform; print(platform.python_version())' 2>/dev/null)," \
  "torch: $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || echo none)"
TREE=$(git rev-parse --short HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || TREE+="+changes"; }
echo "shim: $LIB ($([[ -f $LIB ]] && date -r "$LIB" '+built %Y-%m-%d %H:%M' || echo missing), tree ${TREE:-unknown})"
echo "$PIN_NOTE"

mkdir -p "$BUILD"
# launch_loop compiled? (a failed build skips only the parts that run it).
LOOP_BUILT=0
if wants launch || wants probe || wants memory || wants stats; then
  if "$NVCC" -O2 -g -arch="$ARCH" -o "$BIN" cuda-samples/bench/launch_loop.cu -lcuda; then
    LOOP_BUILT=1
  else
    echo "error: building launch_loop failed: launch, probe, memory and the stats loop are skipped"
  fi
fi
loop_built() { ((LOOP_BUILT)); }

# ---------------------------------------------------------------------------------------- gpu

# shellcheck disable=SC2034  # read through namerefs
gpu_configs=(
  "no shim|"
  "cudablame default (CUDABLAME_MARKERS=budget)|$S"
  "CUDABLAME_MARKERS=every|$S CUDABLAME_MARKERS=every"
  "CUDABLAME_MARKERS=off|$S CUDABLAME_MARKERS=off"
  ${EXTRA[@]+"${EXTRA[@]}"}
)
# verdict4 LO HI LIMIT: met when the median's interval lies under the limit, NOT met when above
# it; else the rounds scatter more than the limit and the run cannot tell.
verdict4() {
  awk -v lo="$1" -v hi="$2" -v l="$3" 'BEGIN {
    if (hi + 0 <= l) print "met"; else if (lo + 0 > l) print "NOT met";
    else print "not proven (the rounds scatter beyond the limit)" }'
}
# goal_line TEXT VALUE LIMIT CMP: "met"/"NOT met" (CMP le: VALUE <= LIMIT; ge: VALUE >= LIMIT).
goal_line() {
  local ok
  ok=$(awk -v v="$2" -v l="$3" -v c="$4" 'BEGIN { print (c == "le" ? v <= l : v >= l) ? "met" : "NOT met" }')
  goal "$1: $ok"
}
if wants gpu; then
  need_lib
  part_start gpu
  if "$NVCC" -O2 -arch="$ARCH" -o "$BUILD/gpu_probe" cuda-samples/bench/gpu_probe.cu; then
    measure gpu_configs "$GPU_REPS" "$BUILD/gpu_probe" "$GPU_N" 3
    for key in tiny_legacy tiny_nonblocking 1m_legacy 1m_nonblocking; do
      TABLE_MED=()
      table gpu_configs "$GPU_REPS" "gpu_${key}_us" us \
        "GPU us per op, $key: $GPU_N kernels queued behind a 50 ms spin kernel (median of 3 in each run), $GPU_REPS rounds"
      if [[ -n ${TABLE_MED[0]-} && -n ${TABLE_MED[1]-} ]]; then
        d=$(awk -v a="${TABLE_MED[0]}" -v b="${TABLE_MED[1]}" 'BEGIN { printf "%+.3f", b - a }')
        e=$(awk -v a="${TABLE_MED[0]}" -v b="${TABLE_MED[2]-0}" 'BEGIN { printf "%+.3f", b - a }')
        goal_line "goal 1, GPU time per op ($key): ${TABLE_MED[0]} us without, default adds $d us \
(CUDABLAME_MARKERS=every adds $e; at most +0.25)" "$d" 0.25 le
      fi
    done
    TABLE_MED=()
    table gpu_configs "$GPU_REPS" queue_depth launches \
      "queue depth: launches enqueued behind a blocked non-blocking stream before the host waits, $GPU_REPS rounds"
    if [[ -n ${TABLE_MED[0]-} && -n ${TABLE_MED[1]-} ]]; then
      r=$(awk -v a="${TABLE_MED[0]}" -v b="${TABLE_MED[1]}" 'BEGIN { printf "%.3f", (a > 0 ? b / a : 0) }')
      goal_line "goal 3, run-ahead: ${TABLE_MED[0]} launches without, ${TABLE_MED[1]} with the default \
(every: ${TABLE_MED[2]-?}; ratio $r, met at 0.95 or more)" "$r" 0.95 ge
    fi
  else
    echo "gpu_probe: build failed"
  fi
  part_end gpu
fi

# ------------------------------------------------------------------------------------- launch

# shellcheck disable=SC2034  # the configuration arrays are read through namerefs (measure, table)
launch_configs=(
  "no shim|"
  "cudablame default (markers budget, native stack)|$S"
  "CUDABLAME_MARKERS=every|$S CUDABLAME_MARKERS=every"
  "markers budget, stack off|$S CUDABLAME_STACK=off"
  "markers off, native stack|$S CUDABLAME_MARKERS=off"
  "markers off, stack off (ring only)|$S CUDABLAME_MARKERS=off CUDABLAME_STACK=off"
  # cudablame_pause(1) after the warm-up: what every hooked call costs when cudablame records
  # nothing, which the training table's same-process comparison (recording vs paused) leaves out.
  "cudablame paused (pass-through only)|$S BENCH_PAUSED=1"
  ${EXTRA[@]+"${EXTRA[@]}"}
)
if wants launch && loop_built; then
  need_lib
  part_start launch
  for mode in $MODES; do
    measure launch_configs "$REPS" "$BIN" "$N" "$mode"
    TABLE_MED=()
    table launch_configs "$REPS" launch_us us \
      "launch loop, $mode mode: host us per empty-kernel launch, $N launches, $REPS rounds" \
      "$([[ $mode == host ]] && echo overruns)"
    if [[ -n ${TABLE_MED[0]-} && -n ${TABLE_MED[1]-} ]]; then
      d=$(awk -v a="${TABLE_MED[0]}" -v b="${TABLE_MED[1]}" 'BEGIN { printf "%+.3f", b - a }')
      goal_line "goal 2, launch loop ($mode): default adds $d us per launch (median of $REPS rounds; \
at most +0.5)" "$d" 0.5 le
    fi
  done
  echo "(overruns: 256-launch batches that outlasted the ~2 ms spin kernel; they may include GPU waits)"
  # Goal 2's launch loop within one process (launch_loop paired: host mode's batches, cudablame
  # paused and recording in ABBA order, N launches each): per run the median over its batch pairs
  # of recording minus paused; over the REPS runs (one process each, one independent estimate)
  # their median and, as its interval, the second smallest and second largest (order_stats), met
  # only when the whole interval is at most +0.5 us (verdict4). What it leaves out is the
  # pass-through itself (the table's paused row against no shim).
  if ((${BENCH_PAIRED_LAUNCH:-1})); then
    added=()
    for ((r = 0; r < REPS; r++)); do
      o=$(run_one "$S" "$BIN" "$N" paired)
      v=$(value paired_added_us "$o")
      if [[ -n $v ]]; then
        added+=("$v")
        echo "paired run $((r + 1)): $(grep -oE 'paired_added_us=.*' <<<"$o")"
      else
        echo "paired run $((r + 1)) failed: $(tail -n 2 <<<"$o" | tr '\n' ' ' | cut -c1-200)"
      fi
    done
    if ((${#added[@]})); then
      read -r am amin amax an alo ahi < <(printf '%s\n' "${added[@]}" | signed_stats 3)
      echo "launch loop, same process, recording vs paused: median $am us per launch over $an runs (min $amin, max $amax; the median's interval $alo to $ahi)"
      goal "goal 2, launch loop (host), same process, recording vs paused (the pass-through's own \
cost is not in it): adds $am us per launch (median of $an runs; interval $alo to $ahi; min $amin, \
max $amax; at most +0.5): $(verdict4 "$alo" "$ahi" 0.5)"
    fi
  fi
  part_end launch
fi

# -------------------------------------------------------------------------------------- probe

if wants probe && loop_built; then
  part_start probe
  echo "host us per call, stream blocked by a spin kernel, no shim, $PROBE_N calls per item;"
  echo "value = median of 128-call batch means; added = minus launch alone:"
  run_one "" "$BIN" "$PROBE_N" probe
  echo "the same on the legacy default stream (where PyTorch launches):"
  run_one "" "$BIN" "$PROBE_N" probe-legacy
  part_end probe
fi

# -------------------------------------------------------------------------------------- graph

if wants graph; then
  part_start graph
  if "$NVCC" -O2 -arch="$ARCH" -o "$BUILD/graph_markers" cuda-samples/bench/graph_markers.cu -lcuda; then
    run_one "" "$BUILD/graph_markers" 64 300
  else
    echo "graph_markers: build failed"
  fi
  part_end graph
fi

# -------------------------------------------------------------------------------------- train

SIZES=gpt,tiny,graph,big
# An eager step is GPU-bound when its GPU activity fills at least this share of it (the no-shim
# runs' median `<size>_gpu_share`); below, the launching thread bounds it (host-bound).
GPU_BOUND_SHARE=0.9
# The cudablame default runs also compare recording with paused cudablame inside their own process
# (train_step.py --paired K: blocks of K steps, ABBA), which the host's drift between processes
# cannot reach; BENCH_PAIRED_BLOCK=0 turns it off.
PAIRED=${BENCH_PAIRED_BLOCK:-5}
[[ $PAIRED =~ ^[0-9]+$ ]] || { echo "BENCH_PAIRED_BLOCK=$PAIRED: not a number of steps" >&2; exit 2; }
# Each run's comparison takes at least BENCH_PAIRED_MS ms of block pairs (train_step.py
# --paired-ms): 4 pairs of 5-step blocks left each run's median so noisy that 7 runs' interval
# spanned 10 points on the small GPT step (sixteenth session); ~1.5 s of pairs per size gives
# 8-15 (gpt, 10-20 ms a step) to 30 (tiny) pairs at about 1-1.5 s more per size and run.
PAIRED_MS=${BENCH_PAIRED_MS:-1500}
[[ $PAIRED_MS =~ ^[0-9]+$ ]] || { echo "BENCH_PAIRED_MS=$PAIRED_MS: not a number of ms" >&2; exit 2; }
PAIRED_ARGS=""
((PAIRED > 0)) && PAIRED_ARGS="|--paired $PAIRED --paired-ms $PAIRED_MS"
train_configs=(
  "no shim|BENCH_COUNT_LAUNCHES=1"
  "cudablame default (markers budget, native + Python stacks)|$S$PAIRED_ARGS"
  ${EXTRA[@]+"${EXTRA[@]}"}
)
if [[ ${BENCH_TRAIN_FULL:-0} == 1 ]]; then
  train_configs+=(
    "CUDA_LAUNCH_BLOCKING=1|CUDA_LAUNCH_BLOCKING=1"
    "cudablame CUDABLAME_STACK=off|$S CUDABLAME_STACK=off"
    "cudablame CUDABLAME_PYTHON=off|$S CUDABLAME_PYTHON=off"
    "cudablame CUDABLAME_MARKERS=off|$S CUDABLAME_MARKERS=off"
    "cudablame CUDABLAME_MARKERS=every|$S CUDABLAME_MARKERS=every"
  )
fi
# same_process SIZE: goal 4's second verdict, from the cudablame default runs' own pairs
# (train_step.py --paired: per run, the median over its block pairs of recording / paused - 1,
# and the medians of its paused and recording blocks). Of the rounds, the median of those
# per-run medians and, as the interval, their second smallest and second largest (order_stats;
# the rule of the verdict above): each run is one process, one independent estimate, while the
# pairs within one run share that process's state (pooling them would count one process's luck
# many times). Uses the caller's lim and what.
same_process() {
  local size=$1 r v vals=() pauseds=() recs=() ns=() sm smin smax sn slo shi pa re np verdict
  for ((r = 0; r < TRAIN_REPS; r++)); do
    v=$(value "${size}_paired_pct" "${OUT_OF[1,$r]-}")
    [[ -n $v ]] || continue
    vals+=("$v")
    pauseds+=("$(value "${size}_paused_ms" "${OUT_OF[1,$r]-}")")
    recs+=("$(value "${size}_recording_ms" "${OUT_OF[1,$r]-}")")
    ns+=("$(value "${size}_paired_n" "${OUT_OF[1,$r]-}")")
  done
  local label="same process, recording vs paused (the pass-through's own cost is not in it: see the launch table's paused row)"
  if ((${#vals[@]} == 0)); then
    echo "$size, $label: no run printed ${size}_paired_pct (a shim without cudablame_pause?)"
    goal "goal 4, $what, $label: not measured (no run printed ${size}_paired_pct)"
    return
  fi
  read -r sm smin smax sn slo shi < <(printf '%s\n' "${vals[@]}" | signed_stats 1)
  read -r pa _ < <(printf '%s\n' "${pauseds[@]}" | order_stats)
  read -r re _ < <(printf '%s\n' "${recs[@]}" | order_stats)
  np=$(printf '%s\n' "${ns[@]}" | sort -gu | paste -sd/ -)
  verdict=$(verdict4 "$slo" "$shi" "$lim")
  SAME_VERDICT=$verdict
  echo "$size, $label: recording / paused - 1 per cudablame run (the median over its $np pairs of" \
    "$PAIRED-step blocks, ABBA), over $sn runs: median $sm% (min $smin%, max $smax%; the median's" \
    "interval $slo% to $shi%); ms per step, medians: paused $pa, recording $re"
  goal "goal 4, $what, $label: median $sm%, interval $slo% to $shi% (min $smin%, max $smax%; $sn runs \
x $np pairs of $PAIRED-step blocks; paused $pa ms, recording $re ms per step); at most +$lim%: $verdict"
}
GPT_NO_SHIM_MS=""
if wants train; then
  need_lib
  part_start train
  measure train_configs "$TRAIN_REPS" "$PYTHON" cuda-samples/bench/train_step.py \
    --size "$SIZES" --steps "$STEPS"
  for size in ${SIZES//,/ }; do
    TABLE_MED=()
    table train_configs "$TRAIN_REPS" "${size}_step_ms" ms \
      "training step ($size): ms per step (median of $STEPS steps per run), $TRAIN_REPS rounds"
    read -r share _ < <(for ((r = 0; r < TRAIN_REPS; r++)); do
      value "${size}_gpu_share" "${OUT_OF[0,$r]-}"
    done | order_stats)
    [[ $share == "?" ]] && share=""
    if [[ $size == graph ]]; then
      lim=1 what="CUDA-graph replays (the gpt step captured whole)"
    elif [[ -z $share ]]; then
      lim=2 what="training step ($size, GPU share not measured: judged as GPU-bound)"
    elif awk -v s="$share" -v b="$GPU_BOUND_SHARE" 'BEGIN { exit !(s >= b) }'; then
      lim=2 what="training step ($size, GPU-bound: GPU busy ${share} of the step)"
    else
      lim=4 what="training step ($size, host-bound: GPU busy ${share} of the step)"
    fi
    SAME_VERDICT="" ACROSS_VERDICT=""
    if [[ -n ${TABLE_MED[0]-} && -n ${TABLE_MED[1]-} ]]; then
      p=$(pct "${TABLE_MED[0]}" "${TABLE_MED[1]}")
      # The verdict: per round, cudablame's run against the no-shim run of the same round (the
      # two run back to back); the median of those ratios. The machine's speed drifts between
      # runs (a GPU-bound step moved between 10 and 20 ms from one process to the next), so
      # pairs within a round compare like with like where medians over all rounds may not.
      read -r pm pmin pmax pn plo phi < <(paired "${size}_step_ms")
      read -r qm _ _ _ _ _ < <(paired "${size}_min_ms")
      if [[ $pn == 0 ]]; then
        goal "goal 4, $what: not measured (no round has both runs)"
      else
        echo "paired rounds ($size): cudablame / no shim per round, median $pm% (min $pmin%, max $pmax%, $pn rounds; the median's interval $plo% to $phi%); of each run's fastest step: median $qm%"
        verdict=$(verdict4 "$plo" "$phi" "$lim")
        ACROSS_VERDICT=$verdict
        goal "goal 4, $what: ${TABLE_MED[0]} ms without, ${TABLE_MED[1]} ms with cudablame ($p, medians \
of $TRAIN_REPS interleaved rounds x $STEPS steps); paired per round: median $pm%, interval $plo% to \
$phi% (min $pmin%, max $pmax%); at most +$lim%: $verdict"
      fi
    fi
    ((PAIRED > 0)) && same_process "$size"
    # One verdict per step: the same-process one where measured (it cancels the host's speed,
    # which changed by up to 2x between processes on the shared GPU machine: the eighteenth
    # session's tiny step ran 7.8 ms without cudablame and 4.7 with it, a "met" across processes
    # that measured the host, while the same process said +4.3%); else the across-process one.
    if [[ -n $SAME_VERDICT ]]; then
      goal "goal 4, $what, verdict: $SAME_VERDICT (same process; across processes: ${ACROSS_VERDICT:-not measured})"
    elif [[ -n $ACROSS_VERDICT ]]; then
      goal "goal 4, $what, verdict: $ACROSS_VERDICT (across processes; the same process not measured)"
    fi
    echo "kernel launches per step (profiler, no shim): $(value "${size}_launches_per_step" "${OUT_OF[0,0]-}"); GPU busy per step $(value "${size}_gpu_busy_ms" "${OUT_OF[0,0]-}") ms, median share of the step over the rounds ${share:-not measured}"
  done
  GPT_NO_SHIM_MS=$(for ((r = 0; r < TRAIN_REPS; r++)); do value gpt_step_ms "${OUT_OF[0,$r]-}"; done |
    sort -g | awk '{a[NR] = $1} END { if (NR) print a[int((NR + 1) / 2)] }')
  part_end train
fi

# ------------------------------------------------------------------------------------- memory

mem_configs=("no shim|" "cudablame default|$S")
if wants memory && loop_built; then
  need_lib
  part_start memory
  echo "resident memory (VmRSS), $MEM_N empty kernels back to back, synchronized every 100,000$(
    ((MEM_N < 10000000)) && echo " (not 10M, to fit the time budget; BENCH_MEM_N=10000000 for it)")"
  RUN_TIMEOUT=${BENCH_MEM_TIMEOUT:-300} measure mem_configs 1 "$BIN" "$MEM_N" rss
  printf '%-52s %10s %10s %10s %10s %8s\n' configuration "start kB" "at 1M kB" "at end kB" "peak kB" "seconds"
  for i in "${!mem_configs[@]}"; do
    o=${OUT_OF[$i,0]-}
    printf '%-52s %10s %10s %10s %10s %8s\n' "${mem_configs[i]%%|*}" "$(value rss_start_kb "$o")" \
      "$(value rss_1m_kb "$o")" "$(value rss_end_kb "$o")" "$(value rss_hwm_kb "$o")" \
      "$(value rss_seconds "$o")"
    [[ -z $(value rss_end_kb "$o") ]] && echo "  failed: $(tail -n 2 <<<"$o" | tr '\n' ' ' | cut -c1-200)"
  done
  a1=$(value rss_1m_kb "${OUT_OF[0,0]-}") b1=$(value rss_1m_kb "${OUT_OF[1,0]-}")
  ae=$(value rss_end_kb "${OUT_OF[0,0]-}") be=$(value rss_end_kb "${OUT_OF[1,0]-}")
  if [[ -n $a1 && -n $b1 && -n $ae && -n $be ]]; then
    mem_line=$(awk -v a1="$a1" -v b1="$b1" -v ae="$ae" -v be="$be" -v n="$MEM_N" 'BEGIN {
      g = (be - b1) - (ae - a1)
      printf "added by cudablame: %.1f MB at 1M launches, %.1f MB at %d; growth from 1M to the end" \
        " %.1f MB with, %.1f MB without: %s\n", (b1 - a1) / 1024, (be - ae) / 1024, n,
        (be - b1) / 1024, (ae - a1) / 1024, g < 1024 ? "flat" : "GROWS"
    }')
    echo "$mem_line"
    goal "memory: $mem_line (goal 3: at most 32 MiB, flat)"
  fi
  part_end memory
fi

# ------------------------------------------------------------------------------------ latency

# latency NAME CMD...: runs CMD under the shim with the report in a fresh dir; prints build_ns.
latency() {
  local name=$1 dir t f rc
  shift
  dir=$(mktemp -d "$BUILD/latency.XXXXXX")
  t=$EPOCHREALTIME
  timeout -k 5 "$RUN_TIMEOUT" env LD_PRELOAD="$LIB" CUDABLAME_REPORT="$dir/report-%p.json" "$@" \
    >"$dir/out.txt" 2>&1
  rc=$?
  t=$(awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  f=$(find "$dir" -name 'report-*.json' | head -1)
  if [[ -z $f ]]; then
    printf '%-36s no report (exit status %d, %s s; output ends: %s)\n' "$name" "$rc" "$t" \
      "$(tail -n 2 "$dir/out.txt" | tr '\n' ' ' | cut -c1-160)"
    return
  fi
  printf '%-36s %9s ms   (whole run %s s, culprit %s)\n' "$name" \
    "$("$PYTHON" -c 'import json, sys; print("%.1f" % (json.load(open(sys.argv[1]))["build_ns"] / 1e6))' "$f")" \
    "$t" \
    "$("$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1]))["culprit"]; print(c.get("confidence"), (c.get("op") or {}).get("kernel", "?")[:60])' "$f" 2>/dev/null)"
}
if wants latency; then
  need_lib
  part_start latency
  echo "report latency: build_ns (faulting call to report written, symbolization included)"
  if "$NVCC" -O2 -g -arch="$ARCH" -o "$BUILD/oob_write" cuda-samples/oob_write.cu; then
    latency "oob_write (C++, static cudart)" "$BUILD/oob_write"
  else
    echo "oob_write: build failed"
  fi
  latency "python/indexing_oob.py (libtorch)" "$PYTHON" cuda-samples/python/indexing_oob.py
  part_end latency
fi

# -------------------------------------------------------------------------------------- stats

if wants stats; then
  need_lib
  part_start stats
  if loop_built; then
    echo "CUDABLAME_STATS=on, launch loop (host mode, $N launches):"
    run_one "$S CUDABLAME_STATS=on" "$BIN" "$N" host | grep -o 'cudablame stats:.*' || echo none
  fi
  # Goal 2's GPT number is the steady state: `train_step.py --paired` pauses cudablame between
  # blocks of steps, and the stats line's "recorded after the first pause" part counts only the
  # ops recorded after that (the warm-up's first launches, module loads and first sight of each
  # kernel and Python code object, left out), timed with CUDABLAME_STATS=total (the hook's entry,
  # real call and exit only: `=on` times each phase with about ten tick readings an op more,
  # which its own time then holds). Two `=on` runs beside them give the phases.
  echo "CUDABLAME_STATS=total (goal 2) and =on (first 2 rounds: phases), GPT training step" \
    "($STEPS steps + 5 warm-up, --paired ${PAIRED_STATS}), $STATS_REPS runs:"
  owns=() alls=()
  for ((r = 0; r < STATS_REPS; r++)); do
    for mode in total on; do
      [[ $mode == on ]] && ((r >= 2)) && continue
      line=$(run_one "$S CUDABLAME_STATS=$mode" "$PYTHON" cuda-samples/bench/train_step.py --size gpt \
        --steps "$STEPS" --paired "$PAIRED_STATS" | grep -o 'cudablame stats:.*' || echo none)
      echo "$mode: $line"
      [[ $mode == total ]] || continue
      own=$(sed -nE 's/.*recorded after the first pause: [0-9]+ ops, real call [0-9]+ ns, cudablame ([0-9]+) ns.*/\1/p' <<<"$line")
      all=$(sed -nE 's/.* \+ cudablame ([0-9]+) .*/\1/p' <<<"$line")
      [[ -n $own ]] && owns+=("$own")
      [[ -n $all ]] && alls+=("$all")
    done
  done
  if ((${#owns[@]})); then
    read -r med lo hi _ < <(printf '%s\n' "${owns[@]}" | order_stats)
    read -r amed alo ahi _ < <(printf '%s\n' "${alls[@]}" | order_stats)
    goal_line "goal 2, GPT step: cudablame's own host time $med ns per recorded op in steady state \
(CUDABLAME_STATS=total, ops after the first pause; median of ${#owns[@]} runs, $lo-$hi; every op, \
warm-up included: $amed, $alo-$ahi; at most 700)" "$med" 700 le
  fi
  part_end stats
fi

# ---------------------------------------------------------------------------------- sanitizer

if wants sanitizer; then
  part_start sanitizer
  SAN=$(command -v compute-sanitizer || echo "$(dirname "$NVCC")/compute-sanitizer")
  left=$((DEADLINE - (SECONDS - T0)))
  if ((left < SAN_TIMEOUT)); then
    SAN_TIMEOUT=$((left > 30 ? left : 30))
    echo "(limit cut to $SAN_TIMEOUT s to end near BENCH_DEADLINE=$DEADLINE s)"
  fi
  t=$SECONDS
  out=$(timeout -k 10 "$SAN_TIMEOUT" "$SAN" --tool memcheck "$PYTHON" cuda-samples/bench/train_step.py \
    --size gpt --steps "$SAN_STEPS" --warmup 1 2>&1)
  rc=$?
  t=$((SECONDS - t))
  v=$(value gpt_step_ms "$out")
  if ((rc == 124 || rc == 137)); then
    echo "compute-sanitizer memcheck, GPT step: timeout (over ${SAN_TIMEOUT} s${v:+; it had printed $v ms per step})"
  elif [[ -z $v ]]; then
    echo "compute-sanitizer memcheck, GPT step: failed (exit status $rc): $(tail -n 3 <<<"$out" | tr '\n' ' ' | cut -c1-240)"
  else
    echo "compute-sanitizer memcheck, GPT step: $v ms per step (median of $SAN_STEPS after 1 warm-up;" \
      "whole run $t s$([[ -n $GPT_NO_SHIM_MS ]] && echo ", no shim $GPT_NO_SHIM_MS ms"))"
    grep -o 'ERROR SUMMARY.*' <<<"$out" | head -1
  fi
  part_end sanitizer
fi

if ((${#GOALS[@]})); then
  printf '\n==== goals (issue 21)\n'
  printf '%s\n' "${GOALS[@]}"
fi
printf '\ntotal: %d s\n' $((SECONDS - T0))
