#!/usr/bin/env bash
# The built-in tasks on one GPU: CUDA against the CPU reference, alone
# throughput and peak GPU memory at two sizes, and how step times follow
# --step-ms.  Runs from a bundle (scripts/bundle.sh) on a GPU node.
# Usage: bench/tasks_gpu.sh BUNDLE_DIR OUT_FILE [TASK...]
#   TASK: pagerank, sgd, image (default: all three)
set -uo pipefail
bin=$1/bin
out=$2
shift 2
tasks=${*:-pagerank sgd image}
want() { [[ " $tasks " == *" $1 "* ]]; }
# Sets args to TASK's input for the step-time table (step) or the profiles (profile).
task_args() {
  case $1:$2 in
    pagerank:step) args=(--rmat-scale 22 --max-iterations 100000 --tolerance 0) ;;
    pagerank:profile) args=(--rmat-scale 20 --max-iterations 100000 --tolerance 0) ;;
    sgd:step) args=(--generate-ratings 20000000 --generate-users 200000 --generate-items 50000 --epochs 100000) ;;
    sgd:profile) args=(--generate-ratings 2000000 --generate-users 50000 --generate-items 10000 --epochs 100000) ;;
    image:*) args=(--generate 32 --generate-size 1920x1080 --width 640 --passes 0) ;;
  esac
}
log=$(mktemp)
field() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d['$1'])"; }
{
  echo "# Built-in tasks on one GPU"
  echo
  echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $(nproc) CPU cores; $(date -u +%F)"
  echo
  echo "## CUDA against the CPU reference"
  echo
  echo '`freeride-tasks-check`'
  echo
  "$bin/freeride-tasks-check" 2>&1
  echo "exit status: $?"
  echo
  echo "## Alone throughput and peak GPU memory"
  echo
  echo "Each run alone on the GPU (\`--standalone --seconds 10 --device cuda --step-ms 2\`)."
  echo
  echo "| task | size | rate | steps | step p50 / p99 ms | peak GPU memory |"
  echo "|---|---|---|---|---|---|"
  run() {
    local name=$1 size=$2; shift 2
    local json
    json=$("$@" --standalone --seconds 10 --device cuda --step-ms 2 2>>"$log" | tail -1)
    if [ -z "$json" ]; then echo "| $name | $size | failed (see log) | | | |"; return; fi
    local rate unit steps p50 p99 mem
    rate=$(echo "$json" | field rate_per_s); unit=$(echo "$json" | field unit)
    steps=$(echo "$json" | field steps); p50=$(echo "$json" | field step_ms_p50)
    p99=$(echo "$json" | field step_ms_p99); mem=$(echo "$json" | field peak_memory_bytes)
    printf "| %s | %s | %.3g %s/s | %s | %s / %s | %.1f MiB |\n" "$name" "$size" "$rate" "$unit" \
      "$steps" "$p50" "$p99" "$(python3 -c "print($mem / 1048576)")"
  }
  if want pagerank; then
    run pagerank "R-MAT 20 (1M vertices, 16.8M edges)" "$bin/freeride-pagerank" --rmat-scale 20 --max-iterations 1000 --tolerance 0
    run pagerank "R-MAT 24 (16.8M vertices, 268M edges)" "$bin/freeride-pagerank" --rmat-scale 24 --max-iterations 1000 --tolerance 0
  fi
  if want sgd; then
    run sgd "2M ratings, 50k x 10k, rank 16" "$bin/freeride-sgd" --generate-ratings 2000000 --generate-users 50000 --generate-items 10000 --epochs 100000
    run sgd "50M ratings, 500k x 100k, rank 32" "$bin/freeride-sgd" --generate-ratings 50000000 --generate-users 500000 --generate-items 100000 --rank 32 --epochs 100000
  fi
  if want image; then
    run image "1920x1080 JPEGs to 640 wide" "$bin/freeride-image" --generate 64 --generate-size 1920x1080 --width 640 --passes 0
    run image "4000x3000 JPEGs to 1920 wide" "$bin/freeride-image" --generate 16 --generate-size 4000x3000 --width 1920 --passes 0
  fi
  echo
  echo "## Step time against --step-ms"
  echo
  echo "PageRank on R-MAT 22, SGD on 20M ratings, image on 1920x1080 JPEGs; 3 s alone per setting."
  echo
  echo "| task | --step-ms | steps | step p50 ms | step p99 ms | max ms |"
  echo "|---|---|---|---|---|---|"
  for ms in 0.5 1 2 5 10; do
    for t in $tasks; do
      task_args "$t" step
      json=$("$bin/freeride-$t" "${args[@]}" --standalone --seconds 3 --device cuda --step-ms $ms 2>>"$log" | tail -1)
      [ -z "$json" ] && { echo "| $t | $ms | failed | | | |"; continue; }
      printf "| %s | %s | %s | %s | %s | %s |\n" $t $ms "$(echo "$json" | field steps)" \
        "$(echo "$json" | field step_ms_p50)" "$(echo "$json" | field step_ms_p99)" "$(echo "$json" | field step_ms_max)"
    done
  done
  echo
  echo "## Task profiles (freeride task-profile, 5 s each)"
  echo
  echo "Peak memory as the task tracks it, and as nvidia-smi sees the whole process (CUDA context included)."
  echo
  echo "| task | alone rate | step p50 / p99 ms | task peak | process (nvidia-smi) | reserved by submit --profile |"
  echo "|---|---|---|---|---|---|"
  for t in $tasks; do
    task_args "$t" profile
    # task-profile's own summary says what `submit --profile` reserves.
    summary=$("$bin/freeride" task-profile --seconds 5 -o "/tmp/$t.profile.json" -- "$bin/freeride-$t" "${args[@]}" --device cuda 2>&1 >/dev/null) \
      || { echo "| $t | failed | | | | |"; echo "$summary" >>"$log"; continue; }
    reserve=$(echo "$summary" | sed -n 's/.*; reserve \(.*\)$/\1/p')
    python3 - "/tmp/$t.profile.json" "$t" "$reserve" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
mib = lambda b: f"{b / 1048576:.1f} MiB"
print(f"| {sys.argv[2]} | {p['rate_per_s']:.3g} {p['unit']}/s | {p['step_ms']['p50']:.3f} / {p['step_ms']['p99']:.3f} | "
      f"{mib(p['peak_memory_bytes'])} | {mib(p['process_gpu_bytes'])} | {sys.argv[3]} |")
PY
  done
} > "$out"
tail -5 "$log" >&2
