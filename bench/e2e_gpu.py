"""End-to-end benchmark on one GPU node: a GPT pipeline (examples/train_gpt_pipeline.py)
trained with side tasks in three modes:

  baseline  no side task getting GPU time (FreeRide marks off);
  freeride  side tasks in the bubbles (marks on), alternated with baseline
            every --alternate iterations inside one launch, so drift cancels;
  naive     the same side tasks run all the time under MPS at priority 1.

With --configs replay:RANK and --gpus 1, the trainer is instead a stand-in
stage on one GPU that replays RANK of a profile (examples/stage_replay_gpu.py).

For each task it also measures the alone rate (`freeride task-profile`, one
GPU per task, in parallel) and reports overhead, harvest ratio, cost saving
and signal latency.  Rows are appended to OUT/e2e_gpu.json as they finish.

    python3 bench/e2e_gpu.py --bundle bundle --out $OUT --tasks pagerank,sgd --configs 1f1b:4

--arms (issue 34): three arms per row in ONE launch per configuration, with the
GPU gate on (bench/e2e_arms.py): no side process, marks off, marks on.  The
sides -- unmodified programs (resnet50, generate: bench/gate_gpu.py's PROGRAMS,
submitted as imperative tasks with --progress-regex) and built-in tasks
(pagerank, sgd, ...) -- are served one after another on every GPU lane while
the pipeline trains.  Rows go to OUT/e2e_gpu_<N>gpu.json, the table to
OUT/e2e_gpu_<N>gpu.md (`python3 bench/e2e_arms.py --table FILE...` merges
several).  On a 2-GPU machine (kind nvidia-h200-x2 or nvidia-h100-x2), carrying
bundle/ from scripts/bundle.sh, one call each (about 8-9 and 5 minutes; the
budget ends the runs in time, and what it left out is listed in the table):

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    # 1F1B M=4 and M=8, Interleaved1F1B V=2 M=8; ResNet-50, generate, PageRank:
    timeout -s TERM 585 python3 bench/e2e_gpu.py --arms --gpus 2 --bundle bundle --out $OUT --budget-seconds 540
    # DeepSpeed and megatron-core, PageRank and ResNet-50.  .whl/ is filled here first (the
    # node has no network; the node's Python is 3.12) and carried (run's carry [".whl"]):
    #   pip wheel --no-deps -w .whl deepspeed==0.19.8     # an sdist on PyPI: built here
    #   pip download --no-deps -d .whl megatron-core==0.16.1 hjson py-cpuinfo pydantic msgpack einops \
    #       nvidia-ml-py --python-version 3.12 --platform manylinux_2_28_x86_64 --only-binary=:all:
    #   (pydantic's own dependencies the same way: pydantic-core, annotated-types, typing-inspection)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site timeout -s TERM 540 python3 bench/e2e_frameworks_gpu.py --arms --bundle bundle \
        --out $OUT --frameworks deepspeed,megatron --budget-seconds 500

On a 4- or 8-GPU kind, --gpus 4 (or 8) gives the 4- (8-) stage rows the same way
(OUT/e2e_gpu_4gpu.json); --configs picks fewer configurations for a shorter call.

A dry run of the same path on CPU lanes (gloo, a small GPT, a Python loop and
PageRank on the CPU), as tests/python/e2e_arms_test.py runs it:

    python3 bench/e2e_gpu.py --arms --device cpu --gpus 2 --bundle bundle --out /tmp/arms \
        --configs 1f1b:4 --noside-seconds 2 --measure-seconds 3 --alternate 3 --side-memory 256MiB
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

from e2e_arms import Arms, add_arms_arguments, log, t_quantile_975  # noqa: F401 - log: also for the benchmarks that import it from here

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
TASKS = {
    "pagerank": ["freeride-pagerank", "--rmat-scale", "22", "--max-iterations", "100000000",
                 "--tolerance", "0", "--device", "cuda", "--step-ms", "2"],
    "sgd": ["freeride-sgd", "--generate-ratings", "20000000", "--generate-users", "200000",
            "--generate-items", "50000", "--epochs", "100000000", "--device", "cuda", "--step-ms", "2"],
    "image": ["freeride-image", "--generate", "32", "--generate-size", "1920x1080", "--width", "640",
              "--passes", "0", "--device", "cuda", "--step-ms", "2"],
    "llm-inference": [PY, "-m", "freeride.tasks.llm_inference", "--preset", "125m", "--batch", "8",
                      "--prompt", "32", "--generate", "96", "--device", "cuda"],
    "resnet18": [PY, "-m", "freeride.tasks.vision", "--model", "resnet18", "--batch", "32", "--device", "cuda"],
    "resnet50": [PY, "-m", "freeride.tasks.vision", "--model", "resnet50", "--batch", "16", "--device", "cuda"],
    "vgg19": [PY, "-m", "freeride.tasks.vision", "--model", "vgg19", "--batch", "8", "--device", "cuda"],
    # A user's unmodified training script (no FreeRide in it), run by the pacer.
    "unmodified-resnet18": [PY, "-m", "freeride.pace", os.path.join(ROOT, "examples", "train_resnet.py"),
                            "--model", "resnet18", "--batch", "64", "--iterations", "100000000"],
    # Misbehaving on purpose (bench/reliability_gpu.py): 1 ms steps with a 40 ms step every 20th.
    "misbehave": [PY, "-m", "freeride.tasks.misbehave", "--device", "cuda", "--step-ms", "1",
                  "--slow-every", "20", "--slow-ms", "40"],
}
MIX = ["pagerank", "sgd", "llm-inference", "resnet18"]  # lane i gets MIX[i]
# For --device cpu, a dry run of the logic on a machine without GPUs.
CPU_TASKS = {
    "pagerank": ["freeride-pagerank", "--rmat-scale", "14", "--max-iterations", "100000000",
                 "--tolerance", "0", "--device", "cpu", "--step-ms", "2"],
    "sgd": ["freeride-sgd", "--generate-ratings", "200000", "--generate-users", "2000",
            "--generate-items", "500", "--epochs", "100000000", "--device", "cpu", "--step-ms", "2"],
    "llm-inference": [PY, "-m", "freeride.tasks.llm_inference", "--preset", "tiny", "--batch", "2",
                      "--prompt", "16", "--generate", "32", "--device", "cpu"],
}


class Bench:
    """One daemon and the training runs against it.  `tasks` maps task names to commands
    (default TASKS); `results` is the JSON file the rows go to, in a.out."""

    def __init__(self, a, tasks: dict | None = None, results: str = "e2e_gpu.json"):
        self.a = a
        self.out = a.out
        self.tasks = tasks or TASKS
        self.results = results
        self.state = os.path.join(a.work, "state")
        self.socket = os.path.join(a.work, "d.sock")
        bundle = os.path.abspath(a.bundle)
        self.env = dict(os.environ, PATH=f"{bundle}/bin:{os.environ['PATH']}", FREERIDE_HOME=bundle,
                        PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(ROOT, "python"),
                                                                  os.environ.get("PYTHONPATH")])),
                        FREERIDE_SOCKET=self.socket)
        self.rows: list[dict] = []
        self.keep: list[str] = []  # files in `out` beside `results` that pack_logs leaves out
        self.trainer_warmup = 4  # iterations each launch leaves out of its timing
        self.alone: dict[str, dict] = {}
        self.gpus = a.gpus
        self.live: dict[str, list] = {}  # the daemon's own estimate per configuration (--live-steps)

    # -- the daemon ---------------------------------------------------------
    def start_daemon(self, extra_args: list[str] | None = None, fresh: bool = True) -> None:
        if fresh:
            shutil.rmtree(self.a.work, ignore_errors=True)
        os.makedirs(self.a.work, exist_ok=True)
        self.daemon_log = open(os.path.join(self.out, "daemon.log"), "a")
        self.daemon = subprocess.Popen(
            ["freeride", "daemon", "--socket", self.socket, "--state-dir", self.state, *self.lane_args(),
             "--allow-root", *getattr(self.a, "daemon_args", "").split(), *(extra_args or [])], env=self.env,
            stdout=self.daemon_log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(self.socket):
                break
            time.sleep(0.05)
        time.sleep(0.5)
        text = open(os.path.join(self.out, "daemon.log")).read()
        log("daemon:", text.strip().replace("\n", " | "))
        pipe = os.path.join(self.state, "mps", "pipe")
        if os.path.exists(os.path.join(pipe, "control")) and self.a.trainer_mps == "join":
            self.env["CUDA_MPS_PIPE_DIRECTORY"] = pipe  # trainers join at priority 0
        else:
            self.env.pop("CUDA_MPS_PIPE_DIRECTORY", None)  # trainers run outside MPS

    def lane_args(self) -> list[str]:
        """One lane per GPU (--cpu-lanes for a CPU dry run: a.device == "cpu")."""
        if getattr(self.a, "device", "cuda") == "cpu":
            return ["--cpu-lanes", str(self.gpus)]
        return ["--gpus", ",".join(map(str, range(self.gpus))), "--mps", self.a.mps,
                "--mps-side-threads", str(self.a.mps_side_threads)]

    def cli(self, *args: str) -> str:
        return subprocess.run(["freeride", args[0], "--socket", self.socket, *args[1:]], env=self.env,
                              check=True, capture_output=True, text=True, timeout=60).stdout

    def status(self) -> dict:
        return json.loads(self.cli("status", "--json", "--all"))

    # -- alone rates --------------------------------------------------------
    def profile_alone(self, names: list[str]) -> None:
        pending = [n for n in names if n not in self.alone]
        for i in range(0, len(pending), self.gpus):
            batch = [(name, self.start_profile(name, gpu)) for gpu, name in enumerate(pending[i:i + self.gpus])]
            for name, proc in batch:
                self.finish_profile(name, proc)

    def start_profile(self, name: str, gpu: int, tag: str = "") -> subprocess.Popen:
        """`freeride task-profile` of built-in task `name` alone on GPU `gpu`, started; its files
        are profile-<name><tag>.json and .log."""
        env = dict(self.env, CUDA_VISIBLE_DEVICES=str(gpu))
        env.pop("CUDA_MPS_PIPE_DIRECTORY", None)  # alone: a dedicated GPU, no MPS
        return subprocess.Popen(
            ["freeride", "task-profile", "--seconds", str(self.a.alone_seconds), "-o",
             os.path.join(self.out, f"profile-{name}{tag}.json"), "--", *self.tasks[name]], env=env,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.out, f"profile-{name}{tag}.log"), "w"))

    def finish_profile(self, name: str, proc: subprocess.Popen, tag: str = "", timeout: float = 300) -> None:
        """Waits for start_profile's process (killed after `timeout` seconds) and keeps its
        profile in self.alone[name + tag]."""
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise SystemExit(f"task-profile of {name} took over {timeout:.0f} s; see profile-{name}{tag}.log")
        if code != 0:
            raise SystemExit(f"task-profile of {name} failed; see profile-{name}{tag}.log")
        profile = self.alone[name + tag] = json.load(open(os.path.join(self.out, f"profile-{name}{tag}.json")))
        log(f"alone {name}{tag}: {profile['rate_per_s']:.4g} {profile['unit']}/s, "
            f"step p99 {profile['step_ms']['p99']:.2f} ms")

    # -- training -------------------------------------------------------------
    def train(self, schedule: str, microbatches: int, freeride: str, name: str,
              script: str = "train_gpt_pipeline.py", extra: tuple = (), steps: int | None = None,
              alternate: int | None = None) -> dict:
        """One launch of examples/`script` (its options are train_gpt_pipeline.py's, plus `extra`)."""
        out = os.path.join(self.out, f"train-{name}.json")
        cmd = self.trainer_command(schedule, microbatches, freeride, out, script, extra, steps or self.a.steps,
                                   self.a.alternate if alternate is None else alternate)
        started = time.monotonic()
        tracing = threading.Event()
        tracer = None
        if getattr(self.a, "trace_tasks", False):
            tracer = threading.Thread(target=self.trace_tasks, daemon=True, args=(
                os.path.join(self.out, f"tasks-trace-{name}.jsonl"), tracing))
            tracer.start()
        try:
            p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=400)
        finally:
            tracing.set()
            if tracer:
                tracer.join()
        with open(os.path.join(self.out, f"train-{name}.log"), "w") as f:
            f.write(p.stdout + p.stderr)
        if p.returncode != 0:
            raise SystemExit(f"training {name} failed:\n{p.stderr[-3000:]}")
        result = json.load(open(out))
        result["wall_s"] = time.monotonic() - started
        log(f"train {name}: {p.stdout.strip().splitlines()[-1]}")
        return result

    def trainer_command(self, schedule: str, microbatches: int, freeride: str, out: str, script: str,
                        extra: tuple, steps: int, alternate: int) -> list[str]:
        """The command of one launch of examples/`script` (a torchrun of --gpus ranks), or of the
        stand-in stage for schedule "replay" (`microbatches` is then the profiled rank)."""
        if schedule == "replay":
            cmd = [PY, os.path.join(ROOT, "examples", "stage_replay_gpu.py"), "--profile",
                   self.a.replay_profile, "--rank", str(microbatches), "--freeride", freeride,
                   "--steps", str(steps), "--warmup", str(self.trainer_warmup), "--out", out]
        else:
            cmd = [PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(self.gpus),
                   os.path.join(ROOT, "examples", script), "--schedule", schedule,
                   "--microbatches", str(microbatches), "--freeride", freeride,
                   "--steps", str(steps), "--warmup", str(self.trainer_warmup), "--preset", self.a.preset,
                   "--out", out, *extra]
        if freeride == "on":
            cmd += ["--freeride-alternate", str(alternate)]
        return cmd

    def trace_tasks(self, path: str, done: threading.Event) -> None:
        """Until `done`: every 50 ms, each task's state, steps and step estimate (the
        daemon's status), one JSON line per sample, for reading why bubbles went unused."""
        with open(path, "w") as f:
            while not done.wait(0.05):
                try:
                    tasks = self.status()["tasks"].get("tasks", [])
                except (subprocess.SubprocessError, ValueError, KeyError):
                    continue
                f.write(json.dumps({"t": time.monotonic_ns(), "tasks": [
                    {k: t.get(k) for k in ("id", "state", "steps", "step_estimate_ns", "progress")}
                    for t in tasks]}) + "\n")

    def submit(self, names: list[str]) -> list[int]:
        ids = []
        for lane, name in enumerate(names):
            reply = json.loads(self.cli("submit", "--json", "--lane", str(lane), "--name",
                                        f"{name}-{lane}-{int(time.time() * 1000) % 100000}",
                                        "--profile", os.path.join(self.out, f"profile-{name}.json")))
            ids.append(int(reply["id"]))
        # Wait until every task has finished its init (PAUSED), so that the
        # measured training sees side work from its first iteration.  A task
        # runs only inside bubbles until it tells the daemon it uses the SDK,
        # so a stand-in stage marks bubbles meanwhile, in a slot of its own
        # (1000 + lane) that the daemon's overhead probe never counts.
        warm_up = [subprocess.Popen(
            ["example_stage_replay", "--socket", self.socket, "--lane", str(lane), "--iterations",
             "100000000", "--busy", "sleep", "--busy-ms", "5", "--bubbles-ms", "20",
             "--slot-base", str(1000 + lane)], env=self.env, stdout=subprocess.DEVNULL)
            for lane in range(len(names))]
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                states = {int(t["id"]): t["state"] for t in self.status()["tasks"].get("tasks", [])}
                if all(states.get(i) in ("PAUSED", "RUNNING") for i in ids):
                    return ids
                if any(states.get(i) in ("FAILED", "CANCELLED", "FINISHED") for i in ids):
                    raise SystemExit(f"a side task ended early: {states}; see {self.state}/tasks/*/stderr.log")
                time.sleep(0.5)
            raise SystemExit(f"side tasks not ready after 180 s: {states}")
        finally:
            for p in warm_up:
                p.kill()
                p.wait()

    def settle(self) -> None:
        """Waits until the lanes' bubble time stops growing (at most 5 s): the daemon accounts for
        bubbles in batches, and a killed stage's open bubble until it notices the death, so
        that time would otherwise land in the next snapshot's bubble time."""
        last, still_since = None, time.monotonic()
        deadline = still_since + 5
        while time.monotonic() < deadline:
            lanes = self.status()["stats"]["lanes"]
            now = [(int(l.get("bubble_ns", 0)), bool(l.get("stage_alive"))) for l in lanes]
            if now != last:
                last, still_since = now, time.monotonic()
            elif not any(alive for _, alive in now) and time.monotonic() - still_since >= 0.5:
                return
            time.sleep(0.1)

    def cancel(self, ids: list[int]) -> None:
        for i in ids:
            try:
                self.cli("cancel", str(i))
            except subprocess.CalledProcessError:
                pass  # it has ended already (failed or finished): nothing to cancel
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            states = [t["state"] for t in self.status()["tasks"].get("tasks", []) if int(t["id"]) in ids]
            if all(s in ("CANCELLED", "FINISHED", "FAILED") for s in states):
                return
            time.sleep(0.3)

    def snapshot(self, ids: list[int]) -> dict:
        """Each lane's bubble time and each task's progress, once the daemon has accounted
        for every bubble of the stages that ended (settle)."""
        self.settle()
        s = self.status()
        lanes = {int(l.get("lane", 0)): l for l in s["stats"]["lanes"]}
        tasks = {int(t["id"]): t for t in s["tasks"].get("tasks", []) if int(t["id"]) in ids}
        return {"bubble_ns": {k: int(v.get("bubble_ns", 0)) for k, v in lanes.items()},
                "progress": {k: float(v.get("progress", 0)) for k, v in tasks.items()}}

    # -- one configuration ----------------------------------------------------
    def run(self, schedule: str, microbatches: int, task: str, framework: str = "torch",
            script: str = "train_gpt_pipeline.py", extra: tuple = (), naive: bool = True) -> None:
        """FreeRide alternating with baseline in one launch, then (if `naive`) naive co-location."""
        self.run_configs([(schedule, microbatches)], task, framework, script, extra, naive)

    def run_configs(self, configs: list[tuple[str, int]], task: str, framework: str = "torch",
                    script: str = "train_gpt_pipeline.py", extra: tuple = (), naive: bool = True) -> None:
        """One row per (schedule, micro-batches) in `configs`, for side task `task`: submitted
        once and kept (paused between launches), so that its start-up is paid once, then each
        configuration's launch with FreeRide alternating with baseline, then (if `naive`) naive
        co-location."""
        names = MIX if task == "mix" else [task] * self.gpus
        names = names[:self.gpus]
        self.profile_alone(sorted(set(names)))
        if getattr(self.a, "live_steps", 0):
            for schedule, m in configs:
                self.live_run(schedule, m, task, names, framework, script, extra)
        ids = self.submit(names)
        try:
            for schedule, m in configs:
                tag = f"{schedule}-m{m}-{task}"
                events_from = os.path.getsize(os.path.join(self.state, "events.jsonl"))
                before = self.snapshot(ids)
                fr = self.train(schedule, m, "on", f"{tag}-{framework}-freeride", script, extra)
                after = self.snapshot(ids)
                fr["live_overhead"] = self.live.get(tag)
                latency = self.signal_latency(events_from)
                self.report(schedule, m, task, names, fr, before, after, latency, framework)
        finally:
            self.cancel(ids)
        if not naive:
            return
        # Naive co-location: the same tasks alone on their GPUs, under MPS at
        # priority 1, all through the training; stopped when it ends.
        for schedule, m in configs:
            naive_procs = []
            for gpu, name in enumerate(names):
                env = dict(self.env, CUDA_VISIBLE_DEVICES=str(gpu), CUDA_MPS_CLIENT_PRIORITY="1")
                naive_procs.append(subprocess.Popen(self.tasks[name] + ["--standalone"], env=env,
                                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(20 if any(self.tasks[n][0] == PY for n in names) else 8)
            run = self.train(schedule, m, "off", f"{schedule}-m{m}-{task}-{framework}-naive", script, extra)
            for p in naive_procs:
                p.kill()
                p.wait()
            self.add_naive_row(schedule, m, task, run, framework)

    def live_run(self, schedule, m, task, names, framework, script, extra) -> None:
        """The daemon's own estimate, from a launch with FreeRide always on and a daemon that
        has seen no other training (its probe schedule fits this configuration's iterations)."""
        tag = f"{schedule}-m{m}-{task}"
        self.close()
        self.start_daemon()
        ids = self.submit(names)
        self.train(schedule, m, "on", f"{tag}-{framework}-live", script, extra,
                   steps=self.a.live_steps, alternate=0)
        self.live[tag] = self.live_overhead()
        log(f"live estimate: {self.live[tag]}")
        self.cancel(ids)

    def live_overhead(self) -> list[dict]:
        """The daemon's own running estimate of the slowdown, per lane (docs/overhead.md)."""
        out = []
        # `status --json` keeps the proto's field names and prints every primitive field.
        for lane in self.status()["stats"].get("lanes", []):
            o = lane["overhead"]
            row = {"lane": int(lane["lane"]), "cycles": int(o["cycles"]), "guard": o["guard_level"]}
            if o["known"]:
                row.update(slowdown_pct=100 * o["slowdown"], low_pct=100 * o["slowdown_low"],
                           high_pct=100 * o["slowdown_high"])
            out.append(row)
        return out

    def signal_latency(self, offset: int) -> dict:
        first_step = {}
        bubbles = []
        with open(os.path.join(self.state, "events.jsonl")) as f:
            f.seek(offset)
            for line in f:
                e = json.loads(line)
                if e["type"] == "step":
                    key = (e["lane"], e["bubble_seq"])
                    first_step[key] = min(first_step.get(key, e["start_ns"]), e["start_ns"])
                elif e["type"] == "bubble":
                    bubbles.append(e)
        waits = sorted(first_step[(b["lane"], b["seq"])] - b["begin_ns"] for b in bubbles
                       if (b["lane"], b["seq"]) in first_step)
        overrun = [b["overrun_ns"] for b in bubbles]
        if not waits:
            return {"p50_us": None, "p99_us": None, "bubbles": len(bubbles), "overrun_ms": sum(overrun) / 1e6}
        q = lambda x: waits[min(len(waits) - 1, int(x * len(waits)))] / 1e3
        return {"p50_us": q(0.5), "p99_us": q(0.99), "bubbles": len(bubbles),
                "bubbles_used": len(waits), "overrun_ms": sum(overrun) / 1e6}

    def common_fields(self, schedule, m, task, framework) -> dict:
        if getattr(self.a, "device", "cuda") == "cpu":
            isolation = "cpu"
        else:
            isolation = f"mps-{self.a.mps}"
            if self.a.mps != "off":
                isolation += f"-trainer-{self.a.trainer_mps}"
                if self.a.mps_side_threads:
                    isolation += f"-side-threads-{self.a.mps_side_threads}"
        if schedule == "replay":
            return {"gpus": self.gpus, "framework": "stage_replay_gpu", "schedule": "replay",
                    "microbatches": None, "replay_profile": os.path.relpath(self.a.replay_profile, ROOT),
                    "replay_rank": m,
                    "task": task, "isolation": isolation}
        return {"gpus": self.gpus, "framework": framework, "schedule": schedule, "microbatches": m,
                "task": task, "isolation": isolation, "preset": self.a.preset}

    def add_naive_row(self, schedule, m, task, naive, framework) -> None:
        """Naive co-location's row, against the baseline of the same configuration's FreeRide launch.
        Its work is not measured, so it has no harvest or saving."""
        common = self.common_fields(schedule, m, task, framework)
        base = next(r for r in reversed(self.rows) if r["mode"] == "baseline"
                    and all(r[k] == v for k, v in common.items()))
        t_naive = statistics.mean(naive["iter_ms"][naive["warmup"]:])
        self.rows.append(dict(common, mode="naive", iter_ms=t_naive,
                              overhead_pct=100 * (t_naive / base["iter_ms"] - 1),
                              harvest_ratio=None, cost_saving_pct=None))
        self.save_rows()
        log(f"ROW {framework} {schedule} m{m} {task} naive: {t_naive:.1f} ms "
            f"({self.rows[-1]['overhead_pct']:+.1f}% against {base['iter_ms']:.1f} ms)")

    def save_rows(self) -> None:
        with open(os.path.join(self.out, self.results), "w") as f:
            json.dump(self.rows, f, indent=1)

    def report(self, schedule, m, task, names, fr, before, after, latency, framework="torch") -> None:
        w = fr["warmup"]
        on = [t for t, f in zip(fr["iter_ms"][w:], fr["freeride_on"][w:]) if f]
        off = [t for t, f in zip(fr["iter_ms"][w:], fr["freeride_on"][w:]) if not f]
        t_base, t_with = statistics.mean(off), statistics.mean(on)
        spread = block_spread(fr["iter_ms"][w:], fr["freeride_on"][w:])
        n = self.gpus
        # Work in "GPU-seconds of alone work", and bubble time, while FreeRide was on.
        gpu_seconds = 0.0
        bubble_s = 0.0
        for lane, (name, tid) in enumerate(zip(names, sorted(after["progress"]))):
            work = after["progress"][tid] - before["progress"].get(tid, 0.0)
            gpu_seconds += work / self.alone[name]["rate_per_s"]
            bubble_s += (after["bubble_ns"][lane] - before["bubble_ns"][lane]) / 1e9
        iterations_on = len([f for f in fr["freeride_on"] if f])
        per_iter = gpu_seconds / max(1, iterations_on)
        saving = (per_iter - n * (t_with - t_base) / 1e3) / (n * t_base / 1e3)
        harvest = gpu_seconds / bubble_s if bubble_s > 0 else 0.0
        common = self.common_fields(schedule, m, task, framework)
        rows = [
            dict(common, mode="baseline", iter_ms=t_base, overhead_pct=0.0, harvest_ratio=0.0,
                 cost_saving_pct=0.0),
            dict(common, mode="freeride", iter_ms=t_with, overhead_pct=100 * (t_with / t_base - 1),
                 harvest_ratio=harvest, cost_saving_pct=100 * saving, work_gpu_s_per_iter=per_iter,
                 bubble_s=bubble_s, signal_latency_p50_us=latency["p50_us"],
                 signal_latency_p99_us=latency["p99_us"], overrun_ms=latency["overrun_ms"],
                 iterations=[len(off), len(on)], overhead_pairs_mean_pct=spread["mean_pct"],
                 overhead_ci95_pct=spread["ci95_pct"],
                 overhead_blocks=spread["pairs"], live_overhead=fr.get("live_overhead")),
        ]
        self.rows += rows
        self.save_rows()
        ci = spread["ci95_pct"]
        ci_text = f" [{ci[0]:+.2f} .. {ci[1]:+.2f}]" if ci else ""
        log(f"ROW {framework} {schedule} m{m} {task}: base {t_base:.1f} ms, freeride {t_with:.1f} ms "
            f"({rows[-1]['overhead_pct']:+.2f}%{ci_text}), "
            f"harvest {harvest:.2f}, saving {100 * saving:.1f}%, "
            f"latency p50 {latency['p50_us']} us p99 {latency['p99_us']} us, "
            f"overrun {latency['overrun_ms']:.1f} ms")

    def close(self) -> None:
        self.daemon.send_signal(signal.SIGTERM)
        try:
            self.daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
        self.pack_logs()

    def pack_logs(self) -> None:
        """Packs the per-launch files and the tasks' own logs into OUT/logs.tar.gz, leaving the
        rows file and the tarball: a device run returns only a few files."""
        import glob
        import tarfile
        keep = {os.path.join(self.out, name) for name in (self.results, *self.keep)}
        loose = [f for f in glob.glob(os.path.join(self.out, "*"))
                 if os.path.isfile(f) and f not in keep and not f.endswith(".tar.gz")]
        task_logs = glob.glob(os.path.join(self.state, "tasks", "*", "std*.log"))
        events = os.path.join(self.state, "events.jsonl")
        with tarfile.open(os.path.join(self.out, "logs.tar.gz"), "w:gz") as tar:
            for f in loose:
                tar.add(f, arcname=os.path.basename(f))
            for f in task_logs:
                tar.add(f, arcname=os.path.relpath(f, self.a.work))
            if os.path.exists(events):
                tar.add(events, arcname="state/events.jsonl")
        for f in loose:
            os.remove(f)


def block_spread(iter_ms: list[float], on: list[bool]) -> dict:
    """The overhead per pair of neighbouring on/off blocks (each on block against the off block
    before it), and a 95% t-interval over the pairs, in percent."""
    blocks: list[tuple[bool, list[float]]] = []
    for t, f in zip(iter_ms, on):
        if blocks and blocks[-1][0] == bool(f):
            blocks[-1][1].append(t)
        else:
            blocks.append((bool(f), [t]))
    ratios = [100 * (statistics.mean(b[1]) / statistics.mean(a[1]) - 1)
              for a, b in zip(blocks, blocks[1:]) if not a[0] and b[0]]
    if len(ratios) < 2:
        return {"pairs": len(ratios), "mean_pct": None, "ci95_pct": None}
    half = t_quantile_975(len(ratios) - 1) * statistics.stdev(ratios) / len(ratios) ** 0.5
    m = statistics.mean(ratios)
    return {"pairs": len(ratios), "mean_pct": m, "ci95_pct": [m - half, m + half]}


def add_bench_arguments(p: argparse.ArgumentParser, work: str, gpus: int, preset: str | None) -> None:
    """The options Bench reads (shared with bench/e2e_frameworks_gpu.py)."""
    p.add_argument("--bundle", default="bundle")
    p.add_argument("--out", required=True)
    p.add_argument("--work", default=work)
    p.add_argument("--steps", type=int, default=44)
    p.add_argument("--alternate", type=int, default=5)
    p.add_argument("--alone-seconds", type=float, default=5)
    p.add_argument("--preset", default=preset)
    p.add_argument("--gpus", type=int, default=gpus)
    p.add_argument("--mps", default="auto")
    p.add_argument("--trainer-mps", choices=["join", "outside"], default="join",
                   help="join: the trainers join the daemon's MPS server at priority 0; outside: "
                        "they run outside MPS, time-sliced with it")
    p.add_argument("--mps-side-threads", type=int, default=0,
                   help="the daemon's --mps-side-threads: side tasks' share of SMs in percent (0: all)")
    p.add_argument("--daemon-args", default="", help="more options for `freeride daemon`, e.g. "
                   "'--probe-every 40 --probe-withhold 3'")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bench_arguments(p, work="/tmp/freeride-e2e", gpus=4, preset="1.3b")
    p.add_argument("--tasks", default="pagerank,sgd,image,llm-inference,resnet18,resnet50,vgg19,mix")
    p.add_argument("--configs", default=None,
                   help="schedule:microbatches,... (default 1f1b:4; with --arms 1f1b:4,1f1b:8,interleaved:8); "
                        "replay:RANK replays that rank of --replay-profile on one GPU "
                        "(examples/stage_replay_gpu.py) instead of training a pipeline")
    p.add_argument("--replay-profile", default=os.path.join(ROOT, "examples", "data", "h200_1f1b_bubbles.json"),
                   help="for replay:RANK configurations: bubbles per rank (`freeride profile --json`)")
    p.add_argument("--no-naive", action="store_true", help="skip the naive co-location launch")
    p.add_argument("--live-steps", type=int, default=0,
                   help="first a launch of this many steps with FreeRide always on, for the daemon's "
                        "live overhead estimate (docs/overhead.md), to set beside the alternating one")
    p.add_argument("--trace-tasks", action="store_true",
                   help="sample each task's state and step estimate every 50 ms during each launch "
                        "(tasks-trace-*.jsonl in the logs)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: a dry run of the benchmark's logic with CPU lanes, a tiny GPT and "
                        "small CPU tasks (pagerank, sgd, llm-inference)")
    add_arms_arguments(p)
    p.add_argument("--sides", default=None,
                   help="--arms: the side programs and built-in tasks, served one after another in each launch "
                        "(default resnet50,generate,pagerank; with --device cpu loop,pagerank); a program may "
                        "take +VAR=VALUE pieces, its run's environment, to measure an interposer experiment "
                        "beside the plain program (resnet50,resnet50+FREERIDE_GATE_QUEUE_ESTIMATE=mean)")
    a = p.parse_args()
    if a.arms and not 0 < a.warm_share <= 1:
        raise SystemExit(f"--warm-share {a.warm_share}: give a share above 0, up to 1")
    os.makedirs(a.out, exist_ok=True)
    cpu = a.device == "cpu"
    if cpu and a.preset == "1.3b":
        a.preset = "cpu-small" if a.arms else "tiny"
    configs = []
    for config in (a.configs or ("1f1b:4,1f1b:8,interleaved:8" if a.arms else "1f1b:4")).split(","):
        schedule, _, m = config.partition(":")
        if not m.isdigit():
            raise SystemExit(f"--configs: {config!r} is not schedule:microbatches (e.g. 1f1b:4)")
        configs.append((schedule, int(m)))
    if any(s == "replay" for s, _ in configs):
        if a.gpus != 1 or cpu:
            raise SystemExit("--configs replay:RANK replays one stage on one GPU: give --gpus 1 (and --device cuda)")
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        from stage_replay_gpu import load_rank
        for schedule, rank in configs:
            if schedule == "replay":
                load_rank(a.replay_profile, rank)  # a bad profile or rank stops here, before any launch
    tasks = CPU_TASKS if cpu else TASKS
    if a.arms:
        if any(s == "replay" for s, _ in configs):
            raise SystemExit("--arms trains real pipelines; the stand-in stage's arms are bench/gate_gpu.py's")
        sides = (a.sides or ("loop,pagerank" if cpu else "resnet50,generate,pagerank")).split(",")
        bench = Bench(a, tasks=tasks, results=f"e2e_gpu_{a.gpus}gpu.json")
        Arms(bench, sides, cpu).run([(schedule, m, "torch", "train_gpt_pipeline.py", ("--device", "cpu") if cpu else ())
                                     for schedule, m in configs])
        return
    for task in a.tasks.split(","):
        if task != "mix" and task not in tasks:
            raise SystemExit(f"--tasks: unknown task {task!r}; known: {', '.join(sorted(tasks))}, mix")
    bench = Bench(a, tasks=tasks)
    bench.start_daemon()
    failed = []
    try:
        for task in a.tasks.split(","):
            log(f"== {task}: {', '.join(f'{s} m{m}' for s, m in configs)}")
            try:
                bench.run_configs(configs, task, extra=("--device", "cpu") if cpu else (),
                                  naive=not a.no_naive)
            except SystemExit as e:  # one task's failure leaves the others' rows
                log(f"{task} failed: {e}")
                failed.append(task)
    finally:
        bench.close()
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
