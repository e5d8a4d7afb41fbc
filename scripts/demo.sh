#!/usr/bin/env bash
# The main job: set up, build, and run a real FreeRide session.
# Here (CPU mode): the real daemon with a CPU lane, a stand-in training stage
# that emits bubble marks through the real shared-memory data plane, and a
# real side task that runs only inside the bubbles.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
B=$PWD/build
OUT=$(mktemp -d /tmp/freeride-demo.XXXXXX)
SOCK=$OUT/daemon.sock
echo "== FreeRide demo (CPU mode: no GPU used; real daemon, data plane and side task)"
echo "   outputs in $OUT"
"$B/freeride" daemon --socket "$SOCK" --state-dir "$OUT/state" --cpu-lanes 1 >"$OUT/daemon.log" 2>&1 &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
"$B/freeride" submit --socket "$SOCK" --name counter --priority 1 -- "$B/example_count_task" --total 100000 --step-us 800
"$B/freeride" submit --socket "$SOCK" --name loop --kind imperative -- "$B/example_imperative_loop" --seconds-of-work 60
sleep 0.3
echo "== stage: 60 iterations of 20 ms compute with bubbles of 5, 12 and 3 ms"
"$B/example_stage_replay" --socket "$SOCK" --iterations 60 --busy-ms 20 --bubbles-ms 5,12,3
"$B/freeride" status --socket "$SOCK" --all
echo "   (the counter takes every bubble its 0.8 ms steps fit; the 3 ms bubbles go to it too."
echo "    The imperative loop has lower priority and runs only when the counter cannot.)"
echo "== event log: $OUT/state/events.jsonl ($(wc -l <"$OUT/state/events.jsonl") events)"
