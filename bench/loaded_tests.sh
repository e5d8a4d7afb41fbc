#!/usr/bin/env bash
# The tests on a loaded machine: while one busy process per core keeps every
# core loaded, runs the whole suite (scripts/test.sh) N times and the tests
# that touch timing M times, and prints each run's result and the counts.
#
#   bench/loaded_tests.sh [--full N] [--timing M] [--duty PCT] [--nice NICE]
#                         [--ctest REGEX] [--pytest "FILE..."] [--pytest-k EXPR]
#
#   --full N      whole-suite runs (default 3; 0 skips them)
#   --timing M    runs of the timing-touching tests (default 20; 0 skips them)
#   --duty PCT    how busy each load process keeps its core (default 90): it
#                 spins PCT% of every 10 ms and sleeps the rest
#   --nice NICE   the load's niceness (default 0: as important as the tests)
#   --ctest REGEX     the timing-touching C++ tests (ctest -R; default below;
#                     "" runs none)
#   --pytest "FILE.." the timing-touching Python test files (default below; ""
#                     runs none), with --pytest-k EXPR to pick tests in them
#
# Why a duty of 90%, not 100%: side tasks on CPU lanes run in SCHED_IDLE by
# default, so they get a core only when nothing else wants it.  Under a load
# that never sleeps at nice 0 they get about 0.3% of a core, and a test that
# waits for a side task to finish work (600 steps, a checkpoint, a resumed
# count) waits until its hang guard ends it: that measures the isolation
# working, not a flaky test.  Since then the tests that wait on a side
# task's progress start their daemon (and the demo) with
# --cpu-task-priority normal: the tasks still run only in bubbles, but share
# a busy core fairly (tests/python/conftest.py: NORMAL_CPU_TASKS), and
# tests/python/cpu_task_priority_test.py checks the SCHED_IDLE default
# without timing.  90% is kept so that runs compare with the earlier ones.
#
# The timing-touching tests: every C++ test that runs on the real clock with
# a real daemon, stage or futex (Hostile*, DaemonIntegration*,
# LaneSegment.TheRealFutex*, TaskSegment*), and the Python tests that run
# the daemon with side tasks (sdk_test.py, pace_test.py) or compare
# profiles (profile_schedules_test.py).  The pipelines of several ranks
# (python_pipeline_cpu, deepspeed, megatron, torchtitan, the demo) take
# minutes each: they run in the whole-suite runs only.
#
# Output: one line per run (a passing whole-suite run adds ctest's count and
# its list of tests that did not run), then the counts; the log of every run that
# failed is kept under build/loaded_tests/.  Results go in bench/results/
# with the command and commit (bench/results/loaded_tests.md).
set -uo pipefail
cd "$(dirname "$0")/.."

full=3
timing=20
duty=90
nice_level=0
timing_ctest='^(Hostile|DaemonIntegration|LaneSegment\.TheRealFutex|TaskSegment)'
timing_pytest="tests/python/sdk_test.py tests/python/pace_test.py tests/python/profile_schedules_test.py"
pytest_k=""
while [ $# -gt 0 ]; do
  case "$1" in
    --full) full="$2"; shift 2 ;;
    --timing) timing="$2"; shift 2 ;;
    --duty) duty="$2"; shift 2 ;;
    --nice) nice_level="$2"; shift 2 ;;
    --ctest) timing_ctest="$2"; shift 2 ;;
    --pytest) timing_pytest="$2"; shift 2 ;;
    --pytest-k) pytest_k="$2"; shift 2 ;;
    -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
    *) echo "loaded_tests.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
done

python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
logs=build/loaded_tests
mkdir -p "$logs"

# One busy process per core, pinned, so that every core is loaded.
load_pids=()
stop_load() {
  for pid in "${load_pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${load_pids[@]}"; do wait "$pid" 2>/dev/null; done
}
trap stop_load EXIT
cores=$(nproc)
for ((core = 0; core < cores; core++)); do
  nice -n "$nice_level" taskset -c "$core" python3 -c "
import time
busy, period = $duty / 100 * 0.010, 0.010
while True:
    start = time.perf_counter()
    while time.perf_counter() - start < busy:
        pass
    if busy < period:
        time.sleep(period - busy)
" &
  load_pids+=($!)
done
echo "load: $cores process(es), one per core, busy ${duty}% of every 10 ms at nice $nice_level"
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (with uncommitted changes)')"
sleep 1
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg)"

full_passed=0
timing_passed=0

for ((i = 1; i <= full; i++)); do
  log="$logs/full_$i.log"
  start=$(date +%s)
  if ./scripts/test.sh > "$log" 2>&1; then
    full_passed=$((full_passed + 1)); result=pass
    # ctest's count, and its list of the tests that did not run (a skip must be seen).
    sed -n '/tests passed, /p; /The following tests did not run:/,/^$/p' "$log"
    rm -f "$log"
  else
    result="FAIL (log: $log; $(grep -cE 'Failed|\*\*\*Failed|FAILED' "$log") failure lines)"
  fi
  echo "full run $i/$full: $result in $(( $(date +%s) - start )) s"
done

if [ "$timing" -gt 0 ] && [ ! -x build/freeride ]; then
  echo "no build/freeride: run scripts/build.sh (or one --full run) first" >&2
  exit 2
fi
for ((i = 1; i <= timing; i++)); do
  log="$logs/timing_$i.log"
  start=$(date +%s)
  ok=1
  : > "$log"
  if [ -n "$timing_ctest" ]; then
    (cd build && ctest -R "$timing_ctest" -j 2 --timeout 900 --output-on-failure) >> "$log" 2>&1 || ok=0
  fi
  if [ -n "$timing_pytest" ]; then
    # shellcheck disable=SC2086  # a list of files
    FREERIDE_BUILD_DIR=build "$python" -m pytest -q -p no:cacheprovider ${pytest_k:+-k "$pytest_k"} \
      $timing_pytest >> "$log" 2>&1 || ok=0
  fi
  if [ $ok = 1 ]; then
    timing_passed=$((timing_passed + 1)); result=pass; rm -f "$log"
  else
    result="FAIL (log: $log)"
  fi
  echo "timing run $i/$timing: $result in $(( $(date +%s) - start )) s"
done

echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$full" -gt 0 ] && echo "whole suite: $full_passed of $full runs passed"
[ "$timing" -gt 0 ] && echo "timing-touching tests (ctest -R '$timing_ctest'; pytest $timing_pytest${pytest_k:+ -k '$pytest_k'}): $timing_passed of $timing runs passed"
[ "$full_passed" -eq "$full" ] && [ "$timing_passed" -eq "$timing" ]
