#!/usr/bin/env bash
# Peak memory of `freeride profile` on a ~1 GB trace: the real rank-0 trace's
# events repeated until the JSON passes 1 GB (plain and gzip).
# Usage: bench/profile_memory.sh [BUILD_DIR] [TARGET_MB]
set -euo pipefail
build=${1:-build}
target_mb=${2:-1024}
src=$(dirname "$0")/../../shared/traces/torch-1f1b-4xh200/trace_1f1b_r0.json.gz
work=$(mktemp -d /tmp/frprof-XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 - "$src" "$work/big.json" "$target_mb" <<'PY'
import gzip, sys
text = gzip.open(sys.argv[1], "rt").read()
head, rest = text.split('"traceEvents": [', 1)
events, tail = rest.rsplit("]", 1)
events = events.strip().rstrip(",")
copies = int(sys.argv[3]) * 1024 * 1024 // len(events) + 1
with open(sys.argv[2], "w") as out:
    out.write(head + '"traceEvents": [')
    for i in range(copies):
        out.write(events if i == 0 else "," + events)
    out.write("]" + tail)
PY
gzip -1 -k "$work/big.json"
for f in "$work/big.json" "$work/big.json.gz"; do
  size=$(stat -c %s "$f")
  /usr/bin/time -f "%M %e" -o "$work/time" "$build/freeride" profile "$f" >/dev/null
  read -r rss_kb secs <"$work/time"
  echo "$(basename "$f"): file $((size / 1048576)) MiB, peak RSS $((rss_kb / 1024)) MiB, $secs s"
done
json_mb=$(( $(stat -c %s "$work/big.json") / 1048576 ))
python3 -c "import resource,json,sys,time; t=time.time(); json.load(open('$work/big.json')); print(f'python json.load of the same $json_mb MiB: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss//1024} MiB, {time.time()-t:.1f} s')" 2>&1 || echo "python json.load: failed (out of memory?)"
