"""freeride.ray's process model on one GPU, without Ray: harvest and overhead in a stand-in stage's bubbles.

What a Ray worker does under freeride.ray is what this benchmark does: a process started outside
the daemon (here, this script's threads stand for Ray workers, `--slots` of them) submits a side
task (`python -m freeride.ray._runner`), sends it a generator of GPU work over its socket, and
waits for the result; the daemon runs the runner like any side task, only inside the lane's
bubbles.  Ray's wheel is too large for the GPU machine, and Ray adds nothing on the node that
this leaves out (placement and object transfer happen before and after).

The trainer is the one-GPU stand-in stage (examples/stage_replay_gpu.py, a profiled rank
replayed with real CUDA work), with FreeRide switched on and off every --alternate iterations in
one launch: the overhead is each on-block against the off-block before it (bench/e2e_gpu.py's
block_spread).  The harvest is the lane's harvested time over its bubble time while the queue ran.

    scripts/bundle.sh && python3 bench/ray_process_model_gpu.py --bundle bundle \\
        --out bench/results/ray_process_model_gpu
    python3 bench/ray_process_model_gpu.py --cpu --bundle build --out /tmp/rpm --size 128 --chunks 10  # no GPU

Each side task starts a Python process that imports torch and makes its CUDA context, outside
bubbles (as every side task's start-up runs): seconds, which --chunks steps of work amortise.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

from e2e_gpu import block_spread  # noqa: E402
from ray_process_model_work import gpu_chunks  # noqa: E402

from freeride.ray import _wire  # noqa: E402
from freeride.ray._daemon import NodeDaemon  # noqa: E402
from freeride.ray._side_task import SideTask  # noqa: E402


def lane_totals(daemon: NodeDaemon) -> tuple[int, int]:
    lane = daemon.status()["stats"]["lanes"][0]
    return int(lane["bubble_ns"]), int(lane["harvested_ns"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", required=True, help="a bundle (scripts/bundle.sh) or a build tree: bin/ or the binaries")
    p.add_argument("--out", required=True, help="a folder for the results")
    p.add_argument("--profile", default=os.path.join(ROOT, "examples", "data", "h200_1f1b_bubbles.json"))
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--steps", type=int, default=400, help="the stand-in's iterations")
    p.add_argument("--alternate", type=int, default=10, help="FreeRide on/off every this many iterations")
    p.add_argument("--slots", type=int, default=2, help="side tasks in flight at once (Ray's slots on the lane)")
    p.add_argument("--chunks", type=int, default=1000, help="steps per side task")
    p.add_argument("--size", type=int, default=2048, help="matrix size of a step's product")
    p.add_argument("--mps", default="auto", help="the daemon's --mps")
    p.add_argument("--cpu", action="store_true", help="a dry run on a CPU lane with the C stand-in stage")
    a = p.parse_args()

    bundle = os.path.abspath(a.bundle)
    bin_dir = os.path.join(bundle, "bin") if os.path.isdir(os.path.join(bundle, "bin")) else bundle
    work = os.path.join(os.path.abspath(a.out), "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    socket = os.path.join(work, "d.sock")
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", FREERIDE_SOCKET=socket,
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(ROOT, "bench")]))
    if os.path.isdir(os.path.join(bundle, "lib")):
        env["FREERIDE_HOME"] = bundle
    else:
        env["FREERIDE_LIB"] = os.path.join(bundle, "libfreeride.so")
    os.environ.update({k: env[k] for k in ("PATH", "FREERIDE_SOCKET", "PYTHONPATH")})
    os.environ.update({k: env[k] for k in ("FREERIDE_HOME", "FREERIDE_LIB") if k in env})
    lanes = ["--cpu-lanes", "1"] if a.cpu else ["--gpus", "0", "--mps", a.mps]
    log = open(os.path.join(a.out, "daemon.log"), "w")
    daemon_proc = subprocess.Popen(["freeride", "daemon", "--socket", socket, "--state-dir", os.path.join(work, "state"),
                                    "--allow-root", *lanes], env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        if os.path.exists(socket):
            break
        time.sleep(0.05)
    time.sleep(0.5)
    pipe = os.path.join(work, "state", "mps", "pipe")
    trainer_env = dict(env)
    if os.path.exists(os.path.join(pipe, "control")):
        trainer_env["CUDA_MPS_PIPE_DIRECTORY"] = pipe  # the trainer joins at priority 0
    daemon = NodeDaemon(socket)
    replay_out = os.path.join(a.out, "replay.json")
    if a.cpu:
        stage = subprocess.Popen(["example_stage_replay", "--socket", socket, "--iterations", str(a.steps * 4),
                                  "--busy", "sleep", "--busy-ms", "6", "--bubbles-ms", "8,4"], env=trainer_env,
                                 stdout=subprocess.DEVNULL)
    else:
        stage = subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", "stage_replay_gpu.py"), "--profile",
                                  a.profile, "--rank", str(a.rank), "--steps", str(a.steps), "--freeride", "on",
                                  "--freeride-alternate", str(a.alternate), "--out", replay_out], env=trainer_env,
                                 stdout=open(os.path.join(a.out, "replay.log"), "w"), stderr=subprocess.STDOUT)

    done: list[dict] = []
    failures: list[str] = []
    lock = threading.Lock()
    device = "cpu" if a.cpu else "cuda"
    start_totals = lane_totals(daemon)
    started = time.monotonic()

    def worker(slot: int) -> None:
        seed = slot
        while stage.poll() is None:
            side = None
            try:
                side = SideTask(_wire.Work("function", gpu_chunks, unit="products",
                                           call=("call", 0, None, (seed, a.chunks, a.size, device), {})),
                                "gpu_chunks", 1 << 30)
                result = side.result()
                with lock:
                    done.append(result)
            except Exception as e:  # noqa: BLE001 - counted and reported
                if stage.poll() is None:
                    with lock:
                        failures.append(f"{type(e).__name__}: {e}")
            finally:
                if side:
                    side.close()
            seed += a.slots

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(a.slots)]
    for t in threads:
        t.start()
    stage.wait()
    seconds = time.monotonic() - started
    end_totals = lane_totals(daemon)
    # The side tasks still in flight have no more bubbles: the daemon's end ends them.  The
    # figures are the queue's while the stage ran; a worker stuck in its last result (its runner
    # waiting for a bubble that will not come) must not hold them back.
    daemon_proc.terminate()
    daemon_proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    with lock:
        done = list(done)

    bubble_ns, harvested_ns = (end_totals[0] - start_totals[0]), (end_totals[1] - start_totals[1])
    summary = {"command": " ".join(sys.argv), "seconds": seconds, "side_tasks_done": len(done),
               "failures": failures[:5], "bubble_s": bubble_ns / 1e9, "harvested_s": harvested_ns / 1e9,
               "harvest": harvested_ns / bubble_ns if bubble_ns else None,
               "products": sum(r["products"] for r in done)}
    if not a.cpu:
        with open(replay_out) as f:
            replay = json.load(f)
        w = replay["warmup"]
        summary["overhead"] = block_spread(replay["iter_ms"][w:], replay["freeride_on"][w:])
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
