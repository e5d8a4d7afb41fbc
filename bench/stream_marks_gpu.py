"""Checks stream-ordered marks on one GPU with the real daemon: a begin mark
enqueued behind GPU work must be written when the GPU gets there, not when
the CPU enqueued it; and a Python side task (LLM inference, through
libfreeride's runner) must step only inside those bubbles.

    python3 bench/stream_marks_gpu.py --bundle bundle --out $OUT
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bundle", default="bundle")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    import torch
    from freeride.stage import Stage

    bundle = os.path.abspath(a.bundle)
    os.environ["FREERIDE_HOME"] = bundle  # this process's Stage loads the bundle's libfreeride
    work = "/tmp/fr-marks"
    subprocess.run(["rm", "-rf", work])
    os.makedirs(work)
    socket, state = f"{work}/d.sock", f"{work}/state"
    env = dict(os.environ, PATH=f"{bundle}/bin:{os.environ['PATH']}", FREERIDE_HOME=bundle,
               PYTHONPATH=os.path.join(ROOT, "python"))
    daemon = subprocess.Popen(["freeride", "daemon", "--socket", socket, "--state-dir", state,
                               "--gpus", "0", "--mps", "off", "--allow-root"], env=env, stdout=subprocess.DEVNULL)
    try:
        while not os.path.exists(socket):
            time.sleep(0.05)
        subprocess.run(["freeride", "submit", "--socket", socket, "--name", "llm", "--", sys.executable,
                        "-m", "freeride.tasks.llm_inference", "--preset", "tiny", "--batch", "8",
                        "--prompt", "16", "--generate", "64", "--device", "cuda"], env=env, check=True)
        time.sleep(15)  # the task imports torch and warms up
        stage = Stage(0, socket)
        main_stream, side = torch.cuda.current_stream(), torch.cuda.Stream()
        # Cycles per millisecond of torch.cuda._sleep, measured.
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(10_000_000)
        end.record()
        torch.cuda.synchronize()
        cycles_per_ms = 10_000_000 / start.elapsed_time(end)

        def mark_point():
            event = torch.cuda.Event()
            event.record(main_stream)
            side.wait_event(event)
            return side.cuda_stream

        issued = []
        for i in range(60):
            torch.cuda._sleep(int(20 * cycles_per_ms))  # "compute": 20 ms
            issued.append(time.monotonic_ns())
            ok = stage.begin_on_stream(mark_point(), i % 3, 0, 8 << 30)
            torch.cuda._sleep(int(10 * cycles_per_ms))  # the "wait": a 10 ms bubble
            stage.end_on_stream(mark_point())
            if not ok:
                raise SystemExit("begin_on_stream failed: no usable CUDA driver")
        torch.cuda.synchronize()
        stage.close()
        time.sleep(1)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    events = [json.loads(line) for line in open(f"{state}/events.jsonl")]
    bubbles = {e["seq"]: e for e in events if e["type"] == "bubble"}
    steps = [e for e in events if e["type"] == "step"]
    ordered = sorted(bubbles.values(), key=lambda b: b["begin_ns"])
    # Each begin written ~20 ms after the CPU enqueued it: the GPU got there then.
    delays = sorted((b["begin_ns"] - t) / 1e6 for b, t in zip(ordered, issued))
    lengths = sorted((b["end_ns"] - b["begin_ns"]) / 1e6 for b in ordered)
    inside = sum(1 for s in steps if s["bubble_seq"] in bubbles and
                 bubbles[s["bubble_seq"]]["begin_ns"] <= s["start_ns"] <= bubbles[s["bubble_seq"]]["end_ns"])
    result = {"bubbles": len(ordered), "begin_after_cpu_issue_ms": {"min": delays[0], "p50": delays[len(delays) // 2],
              "max": delays[-1]}, "bubble_ms": {"min": lengths[0], "p50": lengths[len(lengths) // 2],
              "max": lengths[-1]}, "llm_steps": len(steps), "llm_steps_started_inside": inside,
              "llm_tokens": sum(s["units"] for s in steps)}
    print(json.dumps(result, indent=1))
    with open(os.path.join(a.out, "stream_marks_gpu.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
