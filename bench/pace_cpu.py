"""CPU stand-in of the GPU rows of freeride.pace: an unmodified script
(examples/train_resnet.py --model small) paced in a replayed stage's bubbles.

Busy phases sleep (as a GPU stage's host thread mostly does), so the task has a
core in and out of bubbles alike; the daemon lets it run only in bubbles.
Prints pieces, iterations, the work-based harvest (iterations valued at the
alone rate from --standalone) and the time-based one.

    python3 bench/pace_cpu.py [BUBBLES_MS]          # default 12,25; needs build/ and .venv
"""
import json, os, subprocess, sys, time
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from conftest import Daemon  # noqa: E402
build = ROOT / "build"
env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), FREERIDE_LIB=str(build / "libfreeride.so"))
py = str(ROOT / ".venv" / "bin" / "python")
script = [str(ROOT / "examples" / "train_resnet.py"), "--model", "small", "--image-size", "64", "--batch", "16", "--iterations", "100000000"]
alone = subprocess.run([py, "-m", "freeride.pace", *script, "--standalone", "--seconds", "5"], env=env, capture_output=True, text=True)
rate = json.loads(alone.stdout.strip().splitlines()[-1])
print("alone", rate["rate_per_s"], "it/s, p50", rate["step_ms_p50"], "ms")
d = Daemon(build, env)
try:
    d.cli_run("submit", "--name", "r", "--", py, "-m", "freeride.pace", *script)
    bubbles = sys.argv[1] if len(sys.argv) > 1 else "12,25"
    stage = d.stage("40", bubbles)
    live = d.wait_for_state("r", ("PAUSED", "RUNNING"), 120)
    if live["state"] not in ("PAUSED", "RUNNING"):
        raise SystemExit(f"the task did not start: {live}")
    time.sleep(25)
    info = d.show("r")
    stage.kill()
    ev = d.events()
    steps = [e for e in ev if e["type"] == "step"]
    bub = [e for e in ev if e["type"] == "bubble"]
    units = sum(s["units"] for s in steps)
    bubble_s = sum(b["end_ns"] - b["begin_ns"] for b in bub) / 1e9
    harvested = sum(b["harvested_ns"] for b in bub) / 1e9
    over = sorted(b["overrun_ns"] for b in bub)
    dur = sorted((s["end_ns"] - s["start_ns"]) / 1e6 for s in steps)
    print(f"bubbles {len(bub)} ({bubble_s:.2f} s), pieces {len(steps)} (p50 {dur[len(dur)//2]:.2f} ms, p90 {dur[int(len(dur)*.9)]:.2f}), "
          f"iterations {units:.0f}, work-harvest {units / rate['rate_per_s'] / bubble_s:.2f}, time-harvest {harvested / bubble_s:.2f}, "
          f"overrun p99 {over[int(len(over)*.99)]/1e6:.2f} ms max {over[-1]/1e6:.2f} ms, estimate {int(info['step_estimate_ns'])/1e6:.2f} ms")
finally:
    d.stop()
