"""FreeRide on megatron-core's real pipeline schedules, on CPU (gloo).

megatron-core assumes CUDA for its buffers; examples/train_gpt_megatron.py
--device cpu creates those on the CPU (CudaOnCpu) and otherwise runs
megatron-core's own schedules, p2p communication and process groups.  Runs
the real daemon with 2 CPU lanes, the C++ SGD side task on each, and 2
training processes, and checks for 1F1B (batched p2p) and interleaved 1F1B
(2 chunks per rank, overlapped p2p: the schedule waits on handles) that:
  - training results are identical with and without FreeRide;
  - every iteration marks the same bubbles: marks per rank are a multiple of
    the iterations, and each lane logged exactly slots 0..(marks per iteration - 1);
  - 1F1B with 4 micro-batches marks 5 waits per rank per iteration;
  - side-task steps start only inside the bubbles, and the tasks harvest;
  - without a daemon training is the same and each rank warns once.
Usage: megatron_cpu_test.py SOURCE_DIR BUILD_DIR.  Without torch or megatron-core it fails, unless FREERIDE_SKIP_TORCH=1 asked for the skip (exit 77).
"""
from __future__ import annotations

import sys

from pipeline_harness import Harness, check, require, same_training

require("torch", "numpy", "megatron.core")
H = Harness(sys.argv[1], sys.argv[2], lanes=2)
STEPS = 5


def train(schedule: str, freeride: str, name: str, env=None):
    return H.train("train_gpt_megatron.py", name, ["--steps", str(STEPS), "--warmup", "1", "--schedule", schedule,
                                                    "--freeride", freeride], nproc=2, env=env)


def main() -> None:
    H.start_daemon()
    try:
        for lane in range(2):
            H.submit(lane, f"side{lane}", H.sgd_task())
        results, per_iteration = {}, {}
        for schedule in ("1f1b", "interleaved"):
            base, _ = train(schedule, "off", f"megatron-{schedule}-off")
            harvested, _ = train(schedule, "on", f"megatron-{schedule}-on")
            same_training(base, harvested, schedule)
            check(base["marks"] == [0, 0], f"{schedule}: FreeRide off must send no marks: {base['marks']}")
            check(all(m > 0 and m % STEPS == 0 for m in harvested["marks"]),
                  f"{schedule}: marks per rank {harvested['marks']} are not the same every iteration")
            per_iteration[schedule] = [m // STEPS for m in harvested["marks"]]
            results[schedule] = base
        # Stage 0: 1 send_forward, 3 send_forward_recv_backward, 1 recv_backward;
        # stage 1: 1 recv_forward, 3 send_backward_recv_forward, 1 send_backward.
        check(per_iteration["1f1b"] == [5, 5], f"1f1b marks per iteration: {per_iteration['1f1b']}")

        bubbles, steps, unlogged = H.steps_in_bubbles(min_bubbles=10 * STEPS)
        for lane in range(2):
            slots = {b["slot"] for (l, _), b in bubbles.items() if l == lane}
            expected = set(range(max(per_iteration[s][lane] for s in per_iteration)))
            check(slots == expected, f"lane {lane}: slots {sorted(slots)}, expected {sorted(expected)}")
        work = H.harvested_by_lane(bubbles, steps)
        check(sum(work.values()) > 0, f"the side tasks harvested nothing: {work}")
        print(f"marks per iteration {per_iteration}; {len(steps)} side-task steps in {len(bubbles)} bubbles, "
              f"all started inside their bubble ({len(unlogged)} in bubbles the lane did not log); "
              f"work per lane {work}", flush=True)

        H.check_no_daemon(lambda env: train("interleaved", "on", "megatron-no-daemon", env=env),
                          results["interleaved"], ranks=2)
        print("PASS", flush=True)
    finally:
        H.stop_daemon()


if __name__ == "__main__":
    main()
