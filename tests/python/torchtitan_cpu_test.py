"""freeride.torch with the schedule objects torchtitan builds, on CPU (gloo).

torchtitan (0.3.0) builds its pipeline schedule in
torchtitan/distributed/pipeline_parallel.py: torch's
get_schedule_class(pipeline_parallel_schedule), constructed with
scale_grads=False.  The torchtitan package itself is not installed (it pulls
datasets, wandb, tyro, torchdata and more); examples/train_gpt_pipeline.py
--torchtitan-schedule NAME builds the schedule the same way.  For 1F1B,
Interleaved1F1B and ZBVZeroBubble, under the real daemon, checks that the
results are identical with and without FreeRide, that every rank marked
bubbles, and that the daemon logged them on both lanes.
Usage: torchtitan_cpu_test.py SOURCE_DIR BUILD_DIR.  Without torch it fails, unless FREERIDE_SKIP_TORCH=1 asked for the skip (exit 77).
"""
from __future__ import annotations

import sys

from pipeline_harness import Harness, check, require, same_training

require("torch", "numpy")
H = Harness(sys.argv[1], sys.argv[2], lanes=2)


def main() -> None:
    H.start_daemon()
    try:
        for name in ("1F1B", "Interleaved1F1B", "ZBVZeroBubble"):
            runs = {}
            for freeride in ("off", "on"):
                runs[freeride], _ = H.train("train_gpt_pipeline.py", f"{name}-{freeride}",
                                            ["--steps", "3", "--warmup", "1", "--torchtitan-schedule", name,
                                             "--freeride", freeride], nproc=2)
            same_training(runs["off"], runs["on"], name)
            check(runs["off"]["marks"] == [0, 0], f"{name}: FreeRide off must send no marks")
            check(all(m > 0 and m % 3 == 0 for m in runs["on"]["marks"]),
                  f"{name}: marks per rank {runs['on']['marks']}")
        bubbles, _, _ = H.steps_in_bubbles(min_bubbles=20)
        check({lane for lane, _ in bubbles} == {0, 1}, "the daemon did not log bubbles on both lanes")
        print("PASS", flush=True)
    finally:
        H.stop_daemon()


if __name__ == "__main__":
    main()
