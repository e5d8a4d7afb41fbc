"""FreeRide on DeepSpeed's real pipeline engine, on CPU (gloo, DS_ACCELERATOR=cpu).

Runs the real daemon with 2 CPU lanes, the C++ SGD side task on each, and a
2-stage DeepSpeed pipeline (examples/train_gpt_deepspeed.py, 4 micro-batches)
under torchrun, and checks that:
  - training results are identical with and without FreeRide;
  - each rank marks exactly its 8 waits per train_batch() (4 receives, 4 sends),
    as slots 0-7 of the iteration;
  - side-task steps start only inside those bubbles, and the tasks harvest;
  - without a daemon training is the same and each rank warns once.
Usage: deepspeed_cpu_test.py SOURCE_DIR BUILD_DIR.  Without torch or deepspeed it fails, unless FREERIDE_SKIP_TORCH=1 asked for the skip (exit 77).
"""
from __future__ import annotations

import sys

from pipeline_harness import Harness, check, require, same_training

require("torch", "numpy", "deepspeed")
H = Harness(sys.argv[1], sys.argv[2], lanes=2)
H.env["DS_ACCELERATOR"] = "cpu"
STEPS, MICROBATCHES = 12, 4


def train(freeride: str, name: str, env=None):
    return H.train("train_gpt_deepspeed.py", name, ["--steps", str(STEPS), "--warmup", "1", "--microbatches",
                                                     str(MICROBATCHES), "--freeride", freeride], nproc=2, env=env)


def main() -> None:
    H.start_daemon()
    try:
        for lane in range(2):
            H.submit(lane, f"side{lane}", H.sgd_task())
        base, _ = train("off", "deepspeed-off")
        harvested, _ = train("on", "deepspeed-on")
        same_training(base, harvested, "deepspeed")
        check(base["marks"] == [0, 0], f"FreeRide off must send no marks: {base['marks']}")
        # Stage 0: 4 SendActivation + 4 RecvGrad; stage 1: 4 RecvActivation + 4 SendGrad.
        waits = 2 * MICROBATCHES
        check(harvested["marks"] == [waits * STEPS] * 2, f"marks per rank: {harvested['marks']}")

        bubbles, steps, unlogged = H.steps_in_bubbles(min_bubbles=waits * STEPS)
        for lane in range(2):
            slots = {b["slot"] for (l, _), b in bubbles.items() if l == lane}
            check(slots == set(range(waits)), f"lane {lane}: slots {sorted(slots)}, expected 0-{waits - 1}")
        work = H.harvested_by_lane(bubbles, steps)
        check(sum(work.values()) > 0, f"the side tasks harvested nothing: {work}")
        states = H.task_states()
        check(all(state in ("RUNNING", "PAUSED") for state in states.values()), f"side tasks should be live: {states}")
        print(f"{len(steps)} side-task steps in {len(bubbles)} bubbles, all started inside their bubble "
              f"({len(unlogged)} in bubbles the lane did not log); work per lane {work}", flush=True)

        H.check_no_daemon(lambda env: train("on", "deepspeed-no-daemon", env=env), base, ranks=2)
        print("PASS", flush=True)
    finally:
        H.stop_daemon()


if __name__ == "__main__":
    main()
