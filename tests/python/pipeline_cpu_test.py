"""FreeRide on a real torch.distributed.pipelining job, on CPU (gloo).

Runs the real daemon with 4 CPU lanes, real side tasks (C++ SGD and the
Python LLM-inference task) and 4 training processes of
examples/train_gpt_pipeline.py under torchrun, and checks that:
  - training results are identical with and without FreeRide (1F1B, GPipe, interleaved 1F1B);
  - side-task steps start only inside the stages' bubbles;
  - C++ and Python side tasks both harvested;
  - the trainer never waits on FreeRide: with the daemon frozen (SIGSTOP), a
    side task killed mid-run, or no daemon at all, training finishes with the
    same results (and warns once per rank when there is no daemon).
Usage: pipeline_cpu_test.py SOURCE_DIR BUILD_DIR.  Without torch it fails, unless FREERIDE_SKIP_TORCH=1 asked for the skip (exit 77).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time

from pipeline_harness import Harness, check, require, same_training

require("torch", "numpy")  # numpy: torch.distributed's object p2p needs it
H = Harness(sys.argv[1], sys.argv[2], lanes=4)


def train(schedule: str, freeride: str, name: str, env=None, background=False):
    return H.train("train_gpt_pipeline.py", name, ["--steps", "5", "--warmup", "1", "--schedule", schedule,
                                                    "--freeride", freeride], nproc=4, env=env,
                   background=background)


def main() -> None:
    H.start_daemon()
    try:
        # Pieces of 0.5 ms, not the default 2 ms, so that they fit these short CPU stages' bubbles
        # even where other work slows them: on a loaded machine 2 ms pieces can outgrow every
        # bubble and are then rightly never granted (once seen: "the Python task harvested
        # nothing" with both cores busy), which the check below would take for the SDK's fault.
        llm = ["env", "FREERIDE_PIECE_MS=0.5", sys.executable, "-m", "freeride.tasks.llm_inference", "--preset",
               "tiny", "--device", "cpu", "--batch", "2", "--prompt", "8", "--generate", "32"]
        for lane in range(4):
            H.submit(lane, f"side{lane}", H.sgd_task() if lane < 2 else llm)

        results = {}
        for schedule in ("1f1b", "gpipe", "interleaved"):
            base, _ = train(schedule, "off", f"{schedule}-off")
            harvested, _ = train(schedule, "on", f"{schedule}-on")
            same_training(base, harvested, schedule)
            check(all(m > 0 for m in harvested["marks"]), f"{schedule}: a rank sent no marks: {harvested['marks']}")
            check(base["marks"] == [0, 0, 0, 0], "FreeRide off must send no marks")
            results[schedule] = base

        # The side tasks' steps, against the bubbles the stages marked.
        bubbles, steps, unlogged = H.steps_in_bubbles(min_bubbles=51)
        harvested_by_lane = H.harvested_by_lane(bubbles, steps)
        overrun = sum(s["overrun_ns"] for s in steps if (s["lane"], s["bubble_seq"]) in bubbles)
        states = H.task_states()
        check(all(state in ("RUNNING", "PAUSED") for state in states.values()),
              f"side tasks should all be live: {states}")
        # Lanes 0-1 run the C++ task, 2-3 the Python one.  On a 2-core machine
        # a lane can lose every bubble to CPU contention, so each SDK must have
        # harvested on at least one of its lanes.
        check(harvested_by_lane[0] + harvested_by_lane[1] > 0, f"the C++ task harvested nothing: {harvested_by_lane}")
        check(harvested_by_lane[2] + harvested_by_lane[3] > 0, f"the Python task harvested nothing: {harvested_by_lane}")
        busy = sum(s["end_ns"] - s["start_ns"] for s in steps)
        print(f"{len(steps)} side-task steps in {len(bubbles)} bubbles, all started inside their "
              f"bubble ({len(unlogged)} in bubbles the lane did not log); "
              f"work per lane {harvested_by_lane}; overrun {overrun / 1e6:.1f} ms of "
              f"{busy / 1e6:.1f} ms stepping", flush=True)

        # The trainer never waits on FreeRide: a frozen daemon...
        H.daemon.send_signal(signal.SIGSTOP)
        try:
            frozen, _ = train("1f1b", "on", "1f1b-daemon-frozen")
        finally:
            H.daemon.send_signal(signal.SIGCONT)
        same_training(results["1f1b"], frozen, "daemon frozen")
        # ...a side task killed mid-run...
        process, out = train("1f1b", "on", "1f1b-task-killed", background=True)
        time.sleep(3)
        pid = json.loads(H.cli("show", "side2", "--json"))["pid"]
        if int(pid) > 0:
            os.kill(int(pid), signal.SIGKILL)
        killed, _ = H.finish(process, out, "1f1b-task-killed")
        same_training(results["1f1b"], killed, "side task killed")
        # ...and no daemon at all: one warning per rank.
        H.check_no_daemon(lambda env: train("1f1b", "on", "1f1b-no-daemon", env=env), results["1f1b"], ranks=4)
        print("PASS", flush=True)
    finally:
        H.daemon.send_signal(signal.SIGCONT)
        H.stop_daemon()


if __name__ == "__main__":
    main()
