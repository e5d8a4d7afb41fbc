"""The Slurm recipe (docs/slurm.md, deploy/slurm/) run for real.

Debian's slurmctld and two slurmd "nodes", each in its own network namespace
on this machine (tests/multinode/slurm.py).  A first batch job runs the
recipe: the daemon step (srun --overlap, one FreeRide daemon per node with a
CPU lane), `freeride-slurm wait`, a second daemon started on a node that
already has one (it must be refused, clearly), a CPU side task (SGD)
submitted for each training rank to the node that holds it, a 2-stage GPT
pipeline trained with torchrun over gloo across the namespaces
(`freeride-slurm torchrun`, one rank per node), and `freeride-slurm stop`.
From each node daemon's own event log it then checks that every node's
daemon saw the training's bubbles, that each node's side-task steps started
only inside bubbles (and that some ran: checks.require_side_steps), that
each rank's task went to its node, that the refused start touched nothing,
and that the daemons stopped with the job.  A second job, with two lanes
per node, submits rank 3 (node 2, lane 1) and rank 4 (none: refused), and
ends with its daemons still running: Slurm must stop them.

Usage: slurm_test.py SOURCE_DIR BUILD_DIR [--steps N] [--keep].  Installs
Slurm and munge with scripts/install-slurm.sh when they are missing.  Exit 77
(skipped, with the reason) when not root, or without torch under
FREERIDE_SKIP_TORCH=1.
"""
from __future__ import annotations

import argparse
import os
import pwd
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from multinode import IFNAME, Cluster, check_node, read_events, require_side_steps  # noqa: E402
from multinode.checks import expect  # noqa: E402
from multinode.prereqs import require_root_and_torch, side_task  # noqa: E402
from multinode.slurm import SlurmCluster, missing_programs  # noqa: E402

JOB = """#!/usr/bin/env bash
# The recipe of docs/slurm.md, as deploy/slurm/train.sbatch has it, on CPU lanes, with the
# side tasks at the normal policy rather than SCHED_IDLE, so that they get a core in the bubbles
# of a machine other work keeps busy (tests/python/conftest.py: NORMAL_CPU_TASKS).
set -euo pipefail
slurm={slurm}
srun --overlap --ntasks-per-node=1 "$slurm" daemon --cpu-lanes 1 --cpu-task-priority normal &
daemons=$!
trap '"$slurm" stop || true; wait $daemons || true' EXIT
"$slurm" wait --timeout 120

# Slurm starting a second daemon on a node that has one: refused, and it says why.
if srun --overlap -N 1 -n 1 -w {first} "$slurm" daemon --cpu-lanes 1 >second-start.out 2>&1; then
  echo "a second daemon started on {first}"
  exit 1
fi

for rank in $(seq 0 $((SLURM_JOB_NUM_NODES - 1))); do
  "$slurm" submit --rank "$rank" --ranks-per-node 1 --name "sgd-rank$rank" -- {task}
done

srun --ntasks-per-node=1 "$slurm" torchrun --nproc-per-node 1 {script} --device cpu --preset tiny \\
  --schedule 1f1b --steps {steps} --warmup 1 --freeride on --out {out}

"$slurm" stop
wait $daemons
trap - EXIT
echo "job done"
"""

# Two lanes per node, as for two ranks per node: rank 3 is node 2's lane 1,
# and there is no rank 4.  Then the job ends with its daemons still running
# (no stop, no trap): Slurm ends the daemon step with the job, and each
# daemon stops on its SIGTERM.
JOB_ENDS = """#!/usr/bin/env bash
set -euo pipefail
srun --overlap --ntasks-per-node=1 {slurm} daemon --cpu-lanes 2 &
{slurm} wait --timeout 120
{slurm} submit --rank 3 --ranks-per-node 2 --name rank3 -- {task}
if {slurm} submit --rank 4 --ranks-per-node 2 -- {task} 2>out-of-range.out; then
  echo "rank 4 of 2 nodes x 2 was submitted"
  exit 1
fi
echo "job ends with its daemons running"
"""


def node_paths(nodes_dir: str, job: int, node: str) -> tuple[str, str]:
    """(state directory, socket) of `node`'s daemon in `job`, as freeride-slurm lays them out."""
    node_dir = os.path.join(nodes_dir, f"freeride-{pwd.getpwuid(os.geteuid()).pw_name}-job{job}-{node}")
    return os.path.join(node_dir, "state"), os.path.join(node_dir, "freeride.sock")


def run_job(slurm: SlurmCluster, cluster: Cluster, name: str, text: str, env: dict[str, str]) -> int:
    """Runs the batch script `text` on every node; its job id once it COMPLETED (else fails with its output)."""
    script = os.path.join(cluster.dir, f"{name}.sh")
    with open(script, "w") as f:
        f.write(text)
    output = os.path.join(cluster.dir, f"{name}.out")
    job = slurm.sbatch(script, env, nodes=len(cluster.names), workdir=cluster.dir, output=output)
    state = slurm.wait_job(job, timeout_s=900)
    log = open(output).read() if os.path.exists(output) else "(no output)"
    expect(state == "COMPLETED", f"job {job} ({name}) ended {state}:\n{log[-4000:]}\n{slurm.logs()}")
    # The nodes are idle again only once every step's processes are gone.
    slurm.wait_nodes_idle()
    return job


def only_start_and_stop(node: str, state_dir: str) -> dict:
    """The daemon's log holds one start and, last, one stop, and that daemon is gone; the start event."""
    daemon = [e for e in read_events(state_dir) if e["type"] == "daemon"]
    expect([e["event"] for e in daemon] == ["start", "stop"],
           f"{node}: daemon events {[e['event'] for e in daemon]}, not one start and one stop")
    expect(not os.path.exists(f"/proc/{daemon[0]['pid']}"),
           f"{node}: its daemon (pid {daemon[0]['pid']}) still runs after the job")
    return daemon[0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("source")
    p.add_argument("build")
    p.add_argument("--steps", type=int, default=40, help="training iterations")
    p.add_argument("--keep", action="store_true", help="keep the run directory")
    a = p.parse_args()
    source, build = os.path.abspath(a.source), os.path.abspath(a.build)
    require_root_and_torch()
    if missing_programs():
        print(f"installing Slurm and munge (missing: {', '.join(missing_programs())})", flush=True)
        subprocess.run([os.path.join(source, "scripts", "install-slurm.sh")], check=True)
    started = time.monotonic()
    freeride_slurm = os.path.join(source, "deploy", "slurm", "freeride-slurm")
    with Cluster(build, source, ["n1", "n2"], extra=["ctl"], keep=a.keep) as cluster:
        slurm = SlurmCluster(cluster, controller="ctl").start()
        print(f"slurmctld and {len(slurm.nodes)} slurmd up in {time.monotonic() - started:.0f} s", flush=True)
        nodes_dir = os.path.join(cluster.dir, "nodes")
        os.makedirs(nodes_dir)
        env = dict(cluster.env, PATH=os.pathsep.join([build, os.path.dirname(sys.executable),
                                                      os.environ.get("PATH", "")]),
                   FREERIDE_SLURM_DIR=nodes_dir, FREERIDE_ALLOW_ROOT="1", GLOO_SOCKET_IFNAME=IFNAME)
        env.pop("FREERIDE_SOCKET", None)

        # 1. The recipe, with a training.
        out = os.path.join(cluster.dir, "training.json")
        job = run_job(slurm, cluster, "train", JOB.format(
            slurm=freeride_slurm, first=cluster.names[0], task=" ".join(side_task(build)),
            script=os.path.join(source, "examples", "train_gpt_pipeline.py"), steps=a.steps, out=out), env)
        print(f"job {job} (the recipe, {a.steps} iterations) COMPLETED at {time.monotonic() - started:.0f} s",
              flush=True)
        refused = open(os.path.join(cluster.dir, "second-start.out")).read()
        expect("is in use by another daemon (pid " in refused,
               f"the second daemon on {cluster.names[0]} was not refused clearly:\n{refused}")
        print(f"second start on {cluster.names[0]}: "
              f"{next(line for line in refused.splitlines() if 'in use' in line)}", flush=True)
        records = []
        for k, name in enumerate(cluster.names):
            state_dir, socket = node_paths(nodes_dir, job, name)
            records.append(check_node(name, state_dir, min_bubbles=a.steps, min_steps=0, stopped=True,
                                      socket=socket, freeride=os.path.join(build, "freeride")))
            # One daemon, started once: the refused second start wrote nothing here.
            only_start_and_stop(name, state_dir)
            tasks = {e["name"] for e in read_events(state_dir) if e["type"] == "transition"}
            expect(tasks == {f"sgd-rank{k}"}, f"{name} holds rank {k}, but its daemon ran tasks {tasks}")
            print(records[-1].line(), flush=True)
        require_side_steps(records)
        expect(len({node_paths(nodes_dir, job, n)[0] for n in cluster.names}) == len(cluster.names),
               "two nodes shared a state directory")

        # 2. Ranks on two lanes per node; then a job that ends with its daemons running.
        job = run_job(slurm, cluster, "ends", JOB_ENDS.format(slurm=freeride_slurm,
                                                              task=" ".join(side_task(build))), env)
        out_of_range = open(os.path.join(cluster.dir, "out-of-range.out")).read()
        expect("rank 4 is beyond the job's 4 ranks (2 node(s) of 2)" in out_of_range,
               f"rank 4 was not refused clearly: {out_of_range}")
        for k, name in enumerate(cluster.names):
            state_dir, socket = node_paths(nodes_dir, job, name)
            only_start_and_stop(name, state_dir)
            expect(not os.path.exists(socket), f"{name}: the daemon left its socket {socket}")
            placed = {(e["name"], e["lane"]) for e in read_events(state_dir) if e["type"] == "transition"}
            expect(placed == ({("rank3", 1)} if k == 1 else set()),
                   f"{name}: tasks (name, lane) {placed}; rank 3 belongs on node 2's lane 1")
        print(f"job {job}: rank 3 went to {cluster.names[1]}'s lane 1, rank 4 was refused; the job ended with "
              "its daemons running and Slurm stopped each (daemon start -> stop)", flush=True)
    print(f"PASS in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
