#!/usr/bin/env bash
# Side by side on GPUs: the same e2e bench (bench/e2e_gpu.py) for several
# bundles in the given order (ABBA cancels drift), each launch's event log
# summarised per lane and per slot by bench/analyze_bubbles.py.
#   bench/ab_gpu.sh OUT TASK LABEL=BUNDLE [LABEL=BUNDLE ...]
# e.g. bench/ab_gpu.sh $OUT sgd new=bundle old=bundle/old new2=bundle old2=bundle/old
set -uo pipefail
out=$1 task=$2
shift 2
mkdir -p "$out"
for run in "$@"; do
  label=${run%%=*} bundle=${run#*=}
  echo "== $label ($bundle)"
  python3 bench/e2e_gpu.py --bundle "$bundle" --work "/tmp/fr-$label" --out "$out/$label" \
    --tasks "$task" --configs 1f1b:4 --steps 84 --alone-seconds 2 2>&1 | grep -E "ROW|Error|error" 
  python3 bench/analyze_bubbles.py "/tmp/fr-$label/state/events.jsonl" --slots
done
