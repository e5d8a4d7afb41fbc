"""Two FreeRide "nodes" on one machine, without a scheduler: the harness's own test.

Two network namespaces, a daemon with one CPU lane in each (its own socket,
state directory and shared-memory names), a CPU side task (SGD) on each, and
a 2-stage GPT pipeline trained with torchrun over gloo across the namespaces
(one rank per node).  Checks, from each daemon's own event log, that every
node's daemon saw the training's bubbles, that each node's side-task steps
started only inside bubbles (and that some ran: checks.require_side_steps),
and that the daemons stop at the end (their sockets and segments gone).
Needs root (namespaces) and torch.

Usage: harness_test.py SOURCE_DIR BUILD_DIR.  Exit 77 (skipped, with the
reason) when not root, or without torch under FREERIDE_SKIP_TORCH=1.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from multinode import Cluster, check_node, require_side_steps  # noqa: E402
from multinode.prereqs import require_root_and_torch, side_task  # noqa: E402

STEPS = 30


def main() -> None:
    source, build = sys.argv[1], sys.argv[2]
    require_root_and_torch()
    cores = sorted(os.sched_getaffinity(0))
    with Cluster(build, source, ["n1", "n2"]) as cluster:
        daemons = []
        for k, name in enumerate(cluster.names):
            # Stage k and its lane's side task share core k; the task runs only
            # while the stage waits (in its bubbles), at the normal policy rather
            # than SCHED_IDLE, so that on a machine other work keeps busy it still
            # gets the core in them (tests/python/conftest.py: NORMAL_CPU_TASKS).
            core = str(cores[k % len(cores)])
            daemon = cluster.start_daemon(name, "--cpu-lanes", "1", "--lane-cores", core,
                                          "--cpu-task-priority", "normal")
            daemon.submit(0, f"sgd-{name}", side_task(build))
            daemons.append((daemon, core))
        for daemon, _ in daemons:
            daemon.wait_tasks_live()
        result = cluster.torchrun(
            [d for d, _ in daemons], "examples/train_gpt_pipeline.py",
            ["--device", "cpu", "--preset", "tiny", "--schedule", "1f1b", "--steps", str(STEPS), "--warmup", "1",
             "--freeride", "on"],
            per_node_args=[["--cores", core] for _, core in daemons])
        assert result["ranks"] == 2 and all(m > 0 for m in result["marks"]), f"marks per rank: {result['marks']}"
        print(f"trained {STEPS} iterations on 2 nodes, marks per rank {result['marks']}", flush=True)
        for daemon, _ in daemons:
            code = daemon.stop()
            assert code == 0, f"{daemon.net.name}'s daemon exited with {code}:\n{daemon.log()}"
        records = [check_node(d.net.name, d.state, min_bubbles=STEPS, min_steps=0, stopped=True, socket=d.socket,
                              freeride=os.path.join(build, "freeride")) for d, _ in daemons]
        for record in records:
            print(record.line(), flush=True)
        require_side_steps(records)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
