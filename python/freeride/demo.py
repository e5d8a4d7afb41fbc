"""The FreeRide demo: one command that shows what FreeRide does on this machine.

Run it as ``freeride demo`` (the CLI finds this module and the binaries next
to itself).  It trains twice under the real daemon, first without side tasks
(the baseline) and then with them, and prints ``freeride report`` and the
paths of ``freeride timeline`` pictures:

  gpu     NVIDIA GPUs and PyTorch with CUDA: a GPT pipeline on up to 4 GPUs with
          the CUDA side tasks (PageRank, SGD, image) in its bubbles.
  cpu     no GPU: the same pipeline code on CPU (gloo, torch.distributed.pipelining,
          a tiny GPT) instrumented by freeride.torch, with the CPU versions of
          the side tasks.  The pipeline is fitted to the cores: as many stages
          as cores (2 to 4), stage k and lane k's side task pinned to the same
          core, the side task in SCHED_IDLE (it gets the core only while its
          stage waits), the daemon's own threads below the stages' priority.
          (--cpu-task-priority normal runs the tasks at the normal policy
          instead, still only in bubbles: for machines that other work keeps
          busy, where a SCHED_IDLE task may get no core at all.)
  replay  no PyTorch: stand-in stages replay the bubble timings of the profiled
          4xH200 run (examples/data/h200_1f1b_bubbles.json) through the same
          shared-memory data plane.

Every mode runs the real daemon, data plane and side-task processes.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

LANES = 4
# What each lane runs: (name, command) for CPU and for CUDA.  Steps are sized
# to about a millisecond so that even the short bubbles can be used.
CPU_TASKS = [
    ("sgd", ["freeride-sgd", "--generate-ratings", "300000", "--device", "cpu", "--epochs",
             "100000000", "--step-ms", "1"]),
    ("pagerank", ["freeride-pagerank", "--rmat-scale", "15", "--device", "cpu", "--max-iterations",
                  "100000000", "--tolerance", "0", "--step-ms", "1"]),
]
GPU_TASKS = [
    ("pagerank", ["freeride-pagerank", "--rmat-scale", "22", "--device", "cuda", "--max-iterations",
                  "100000000", "--tolerance", "0", "--step-ms", "2"]),
    ("sgd", ["freeride-sgd", "--generate-ratings", "20000000", "--generate-users", "200000",
             "--generate-items", "50000", "--epochs", "100000000", "--device", "cuda", "--step-ms", "2"]),
    ("image", ["freeride-image", "--generate", "32", "--generate-size", "1920x1080", "--width", "640",
               "--passes", "0", "--device", "cuda", "--step-ms", "2"]),
]


def say(text: str = "") -> None:
    print(text, flush=True)


class DemoError(RuntimeError):
    pass


class Demo:
    def __init__(self, args):
        self.args = args
        # The folder holding this package goes on the children's PYTHONPATH:
        # share/freeride/python in an install, site-packages for a wheel.
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        # The examples: the CLI says where (an install's share/freeride, a
        # wheel's freeride/_share, the source tree).
        self.share = os.environ.get("FREERIDE_SHARE") or os.path.dirname(package_parent)
        self.out = args.out
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in [package_parent, os.environ.get("PYTHONPATH", "")] if p)
        self.env.pop("FREERIDE_SOCKET", None)
        self.daemons: list[subprocess.Popen] = []

    # -- helpers --------------------------------------------------------------
    def run(self, cmd, log_name, timeout=600, env=None):
        p = self.spawn(cmd, log_name, env)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise DemoError(f"{' '.join(cmd[:3])}... ran past {timeout} s; see {log_name}")
        if code != 0:
            raise DemoError(f"{' '.join(cmd[:3])}... failed (exit {code}); last lines of "
                            f"{log_name}:\n{self.tail(log_name)}")

    def spawn(self, cmd, log_name, env=None, core=None):
        """Starts cmd with its output in log_name (the child keeps its own copy of
        the file), pinned to `core` when given."""
        pin = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
        with open(os.path.join(self.out, log_name), "w") as log:
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env or self.env,
                                    cwd=self.out, preexec_fn=pin)

    def tail(self, log_name, lines=15):
        try:
            with open(os.path.join(self.out, log_name)) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def freeride(self, *args, capture=False):
        cmd = ["freeride", *args]
        if capture:
            return subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=120)
        return subprocess.run(cmd, env=self.env, timeout=120)

    def start_daemon(self, phase, lanes_args):
        """Starts the daemon.  In CPU mode its threads other than the lanes'
        (real-time) dispatchers run at nice 10, below the stages they share
        cores with."""
        socket = os.path.join(self.out, f"{phase}.sock")
        state = os.path.join(self.out, phase)
        # In a container the demo is often root; the daemon refuses root
        # unless told, since its side tasks then run as root too.
        as_root = ["--allow-root"] if os.geteuid() == 0 else []
        nice = ["nice", "-n", "10"] if self.mode != "gpu" else []
        priority = ["--cpu-task-priority", self.args.cpu_task_priority] if self.mode != "gpu" else []
        daemon = self.spawn([*nice, "freeride", "daemon", "--socket", socket, "--state-dir", state,
                             *as_root, *lanes_args, *priority], f"{phase}-daemon.log")
        self.daemons.append(daemon)
        for _ in range(200):
            if os.path.exists(socket) or daemon.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.exists(socket):
            raise DemoError(f"the daemon did not start:\n{self.tail(f'{phase}-daemon.log')}")
        time.sleep(0.2)
        for line in open(os.path.join(self.out, f"{phase}-daemon.log")):
            if line.strip().startswith("MPS"):
                say(f"    daemon: {line.strip()}")
        return socket, state

    def stop_daemons(self):
        for daemon in self.daemons:
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
                try:
                    daemon.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()
        self.daemons = []

    def watch(self, socket, label, stop: threading.Event):
        """Prints a progress line from the daemon's own counters: every second
        on GPUs, every 5 s on CPU, where each `freeride status` takes a core
        from a stage."""
        start = time.time()
        terminal = sys.stdout.isatty()
        last_print = 0.0
        while not stop.wait(1.0 if self.mode == "gpu" else 5.0):
            r = self.freeride("status", "--socket", socket, "--json", capture=True)
            try:
                lanes = json.loads(r.stdout)["stats"].get("lanes", [])
            except (ValueError, KeyError):
                continue
            bubbles = sum(int(l.get("bubbles", 0)) for l in lanes)
            idle = sum(int(l.get("bubble_ns", 0)) for l in lanes) / 1e9
            used = sum(int(l.get("harvested_ns", 0)) for l in lanes) / 1e9
            line = (f"  {label}: {time.time() - start:4.0f} s, {bubbles} bubbles, {idle:.1f} s idle"
                    + (f", side tasks used {100 * used / idle:.0f}% of it" if idle > 0 and used > 0 else ""))
            if terminal:
                print("\r" + line.ljust(100), end="", flush=True)
            elif time.time() - last_print >= 5:
                say(line)
                last_print = time.time()
        if terminal:
            print(flush=True)

    def with_progress(self, socket, label, fn):
        stop = threading.Event()
        watcher = threading.Thread(target=self.watch, args=(socket, label, stop), daemon=True)
        watcher.start()
        try:
            fn()
        finally:
            stop.set()
            watcher.join()

    # -- phases ---------------------------------------------------------------
    def profile_tasks(self, tasks, gpu):
        """Alone rates: each task on its own, for a few seconds (GPU: one GPU each)."""
        profiles, jobs = {}, []
        for i, (name, cmd) in enumerate(tasks):
            path = os.path.join(self.out, f"profile-{name}.json")
            env = dict(self.env)
            if gpu:
                env["CUDA_VISIBLE_DEVICES"] = str(i % self.gpus)
            job = self.spawn(["freeride", "task-profile", "--seconds", str(self.args.profile_seconds),
                              "-o", path, "--", *cmd], f"profile-{name}.log", env=env)
            jobs.append((name, path, job))
            if not gpu:
                job.wait()  # on CPU, one at a time: they would share the cores
        for name, path, job in jobs:
            if job.wait(timeout=600) != 0:
                raise DemoError(f"freeride task-profile {name} failed:\n{self.tail(f'profile-{name}.log')}")
            profile = json.load(open(path))
            profiles[name] = path
            say(f"    {name}: {profile['rate_per_s']:.4g} {profile['unit']}/s alone, step p99 "
                f"{profile['step_ms']['p99']:.2f} ms")
        return profiles

    def submit_tasks(self, socket, tasks, profiles):
        for lane in range(self.lanes):
            name = tasks[lane % len(tasks)][0]
            r = self.freeride("submit", "--socket", socket, "--lane", str(lane), "--name",
                              f"{name}-{lane}", "--profile", profiles[name], capture=True)
            if r.returncode != 0:
                raise DemoError(f"freeride submit failed: {r.stderr.strip()}")

    def train_command(self):
        script = os.path.join(self.share, "examples", "train_gpt_pipeline.py")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--monitor-interval", "1",
               "--nproc-per-node", str(self.lanes), script, "--freeride", "on", "--steps",
               str(self.args.steps)]
        if self.mode == "cpu":
            cmd += ["--device", "cpu", "--preset", "tiny", "--cores", ",".join(map(str, self.cores))]
        else:
            cmd += ["--device", "cuda", "--preset", self.args.preset]
        return cmd

    def replay_commands(self):
        table = json.load(open(os.path.join(self.share, "examples", "data", "h200_1f1b_bubbles.json")))
        iterations = max(20, self.args.steps // 2)
        cmds = []
        for rank in table["ranks"][: self.lanes]:
            slots = ",".join(f"{b['start_ms']}:{b['duration_ms']}" for b in rank["bubbles"])
            cmds.append(["example_stage_replay", "--lane", str(rank["rank"]), "--iterations",
                         str(iterations), "--iteration-ms", str(rank["iteration_ms"]), "--slots-ms",
                         slots, "--busy", "sleep"])
        return cmds

    def side_tasks_did_nothing(self, report_json: str) -> str:
        """Why the side tasks did no step in any bubble, when they did none ("" when they did, or
        the report cannot be read): on CPU lanes, SCHED_IDLE tasks on a machine whose other work
        keeps every core busy never get one."""
        try:
            steps = sum(int(lane.get("steps", 0)) for lane in json.loads(report_json).get("lanes", []))
        except (ValueError, TypeError, AttributeError):
            return ""
        if steps > 0:
            return ""
        load = os.getloadavg()[0]
        if self.mode != "gpu" and self.args.cpu_task_priority == "idle":
            return (f"the side tasks did no step: they run in SCHED_IDLE (--cpu-task-priority idle, the "
                    f"default), so they get a core only when nothing else wants it, and this machine's other "
                    f"work kept its cores busy (load average {load:.1f} on {os.cpu_count()} cores). Run the demo "
                    "on a quieter machine, or with --cpu-task-priority normal (the tasks still run only in "
                    "bubbles, sharing the core with other work then).")
        return (f"the side tasks did no step in any bubble (load average {load:.1f} on {os.cpu_count()} "
                "cores); their logs are under the output folder's daemon logs")

    def wait_for_tasks(self, socket, timeout=120):
        """Waits until every side task is launched.  An iterative task runs only
        inside bubbles until the SDK attaches, so it initialises in the
        training's first bubbles, never at the training's expense."""
        deadline = time.time() + timeout
        while True:
            r = self.freeride("status", "--socket", socket, "--json", "--all", capture=True)
            try:
                tasks = json.loads(r.stdout)["tasks"].get("tasks", [])
            except (ValueError, KeyError):
                tasks = []
            failed = [t for t in tasks if t.get("state") == "FAILED" or
                      (t.get("state") == "SUBMITTED" and "retrying" in t.get("message", ""))]
            if failed:
                t = failed[0]
                raise DemoError(f"side task {t['spec']['name']} failed: {t.get('message', '')}\n"
                                f"{t.get('stderr_tail', '')}")
            if tasks and all(t.get("state") in ("PAUSED", "RUNNING") or int(t.get("pid", 0)) > 0
                             for t in tasks):
                return
            if time.time() > deadline:
                states = ", ".join(f"{t['spec']['name']} {t.get('state')}" for t in tasks)
                raise DemoError(f"side tasks not ready after {timeout} s: {states}")
            time.sleep(0.5)

    def train(self, socket, phase, run=None):
        """One training against the daemon of `phase`; its logs are named
        after `run` (default: the phase)."""
        run = run or phase
        env = dict(self.env, FREERIDE_SOCKET=socket)
        pipe = os.path.join(self.out, phase, "mps", "pipe")
        if os.path.exists(os.path.join(pipe, "control")):
            env["CUDA_MPS_PIPE_DIRECTORY"] = pipe  # the trainer joins MPS at priority 0
        if self.mode == "replay":
            procs = [self.spawn(cmd + ["--socket", socket], f"{run}-stage{i}.log", env=env,
                                core=self.cores[i])
                     for i, cmd in enumerate(self.replay_commands())]
            for i, p in enumerate(procs):
                if p.wait(timeout=600) != 0:
                    raise DemoError(f"stage {i} failed:\n{self.tail(f'{run}-stage{i}.log')}")
        else:
            self.run(self.train_command(), f"{run}-training.log", env=env)
            for line in open(os.path.join(self.out, f"{run}-training.log")):
                if line.startswith("iteration "):
                    say(f"    training ({run}): {line.strip()}")

    def baseline_then_freeride(self, lanes_args, tasks, profiles):
        """GPU mode: the baseline under one daemon, then the training with side
        tasks under another; returns their state directories."""
        say(f"[2/4] baseline: training with FreeRide's marks but no side tasks")
        socket, baseline_state = self.start_daemon("baseline", lanes_args)
        try:
            self.with_progress(socket, "baseline", lambda: self.train(socket, "baseline"))
        finally:
            self.stop_daemons()
        say(f"[3/4] FreeRide: the same training with a side task on every lane, in the bubbles only")
        socket, state = self.start_daemon("freeride", lanes_args)
        try:
            self.submit_tasks(socket, tasks, profiles)
            say("    waiting for the side tasks to start and load their data")
            self.wait_for_tasks(socket)
            self.with_progress(socket, "with side tasks", lambda: self.train(socket, "freeride"))
            self.save_status(socket)
        finally:
            self.stop_daemons()
        return state, baseline_state

    def alternating(self, lanes_args, tasks, profiles):
        """CPU and replay modes: two daemons at once, one without side tasks (the
        baseline) and one with a task on every lane, and trainings against them
        in turn (B F F B ...), so that whatever else loads this machine falls on
        both alike; returns their state directories.  Each daemon's log holds
        several trainings; the report leaves out the pauses between them."""
        rounds = self.args.rounds
        say(f"[2/4] two daemons: one with no side tasks (the baseline), one with a side task on every lane")
        base_socket, baseline_state = self.start_daemon("baseline", lanes_args)
        socket, state = self.start_daemon("freeride", lanes_args)
        try:
            self.submit_tasks(socket, tasks, profiles)
            say("    waiting for the side tasks to start and load their data")
            self.wait_for_tasks(socket)
            order = []
            for r in range(rounds):
                pair = [("baseline", base_socket), ("freeride", socket)]
                order += pair if r % 2 == 0 else pair[::-1]
            say(f"[3/4] {len(order)} trainings of {self.args.steps} steps, in the order "
                f"{' '.join('B' if phase == 'baseline' else 'F' for phase, _ in order)} "
                "(B: baseline, F: side tasks in the bubbles)")
            for i, (phase, sock) in enumerate(order):
                run = f"{phase}-{i + 1}"
                label = "baseline" if phase == "baseline" else "with side tasks"
                self.with_progress(sock, label, lambda: self.train(sock, phase, run))
            self.save_status(socket)
        finally:
            self.stop_daemons()
        return state, baseline_state

    def save_status(self, socket):
        status = self.freeride("status", "--socket", socket, "--all", capture=True).stdout
        open(os.path.join(self.out, "status.txt"), "w").write(status)

    def main(self):
        a = self.args
        self.mode, why = self.choose_mode()
        if a.steps is None:
            a.steps = 100 if self.mode == "gpu" else 80
        self.lanes = {"gpu": min(LANES, self.gpus), "cpu": cpu_stages(), "replay": cpu_stages()}[self.mode]
        # CPU: stage k and lane k's side task share core k of the cores this
        # process may use (the stage runs; its task only while it waits).
        allowed = sorted(os.sched_getaffinity(0))
        self.cores = [allowed[k % len(allowed)] for k in range(self.lanes)]
        tasks = GPU_TASKS if self.mode == "gpu" else CPU_TASKS
        idle = a.cpu_task_priority == "idle"
        how_tasks_run = ("in SCHED_IDLE so it gets the core only while the stage waits" if idle else
                         "at the normal policy (--cpu-task-priority normal), run only while the stage "
                         "waits but sharing the core with other work then")
        say("== FreeRide demo: " + {
            "gpu": f"GPU mode: {self.lanes} GPUs, a GPT ({a.preset}) pipeline with CUDA side tasks",
            "cpu": f"CPU mode (no GPU here): real PyTorch pipeline training on CPU (gloo), {self.lanes} "
                   f"stages on {len(allowed)} cores, the real daemon with CPU lanes, real CPU side tasks",
            "replay": f"replay mode: {self.lanes} stand-in stages replay the bubbles of ranks 0-{self.lanes - 1} "
                      "of a profiled 4xH200 run through the real daemon, data plane and CPU side tasks",
        }[self.mode])
        say("   measures: " + {
            "gpu": "the training's iteration time with CUDA side tasks in its bubbles against a run "
                   "without them, the bubble time the tasks used, and the saving (their work at "
                   "their alone rate, less the slowdown)",
            "cpu": f"the training's iteration time with side tasks in its bubbles against a run without "
                   f"them, with stage k and lane k's task pinned together to core k "
                   f"({', '.join(f'stage {k}: core {c}' for k, c in enumerate(self.cores))}), the task "
                   f"{how_tasks_run}; the bubble time the tasks used; the saving (their work at their "
                   "alone rate, less the slowdown)"
                   + ("" if len(allowed) > LANES else
                      f"; with {len(allowed)} cores there is none to spare for the daemon and the rest, "
                      "and a task on a stage's core slows its compute even though it yields at once, "
                      "so the slowdown here is mostly that (the replay mode, the default here, avoids it)"),
            "replay": "how much of the profiled 4xH200 bubble time the daemon hands to real side "
                      "tasks and their overrun, with stage k and lane k's task pinned together to core "
                      f"{', '.join(map(str, self.cores))} respectively (the task "
                      f"{'in SCHED_IDLE' if idle else 'at the normal policy'}); the stand-in "
                      "stages sleep through their busy time (the GPU's compute), so the slowdown "
                      "shows what the marks, the dispatch and the tasks cost a stage's timeline, not "
                      "a GPU kernel's interference",
        }[self.mode])
        if why:
            say(f"   ({why})")
        say(f"   outputs in {self.out}")
        lanes_args = (["--gpus", ",".join(map(str, range(self.lanes))), "--mps", "auto"] if self.mode == "gpu"
                      else ["--cpu-lanes", str(self.lanes), "--lane-cores", ",".join(map(str, self.cores))])

        say(f"[1/4] measuring each side task alone ({a.profile_seconds:g} s each): its alone rate values the harvested work")
        profiles = self.profile_tasks(tasks, self.mode == "gpu")

        if self.mode == "gpu":
            state, baseline_state = self.baseline_then_freeride(lanes_args, tasks, profiles)
        else:
            state, baseline_state = self.alternating(lanes_args, tasks, profiles)

        say("[4/4] report and timeline")
        report_args = [state, "--baseline", baseline_state, "--gpu-hour-price", str(a.gpu_hour_price)]
        report = self.freeride("report", *report_args, capture=True)
        if report.returncode != 0:
            raise DemoError(f"freeride report failed: {report.stderr}")
        open(os.path.join(self.out, "report.txt"), "w").write(report.stdout)
        report_json = self.freeride("report", *report_args, "--json", capture=True).stdout
        open(os.path.join(self.out, "report.json"), "w").write(report_json)
        svg = os.path.join(self.out, "timeline.svg")
        trace = os.path.join(self.out, "timeline.perfetto.json")
        timeline = self.freeride("timeline", state, "--svg", svg, "--perfetto", trace, capture=True)
        if timeline.returncode != 0:
            raise DemoError(f"freeride timeline failed: {timeline.stderr}")
        say()
        say(report.stdout.rstrip())
        say()
        idle_tasks_starved = self.side_tasks_did_nothing(report_json)
        if idle_tasks_starved:
            say(f"   (note: {idle_tasks_starved})")
        if self.mode != "gpu":
            say(f"   (mode {self.mode}: lanes stand for GPUs; the money figure assumes "
                f"{a.gpu_hour_price:g} per GPU-hour, set with --gpu-hour-price)")
        if self.mode == "cpu":
            say(f"   (CPU mode: each stage shares its core and caches with its lane's side task, and "
                "the cores with the daemon and anything else running on this machine: the slowdown "
                "includes that; on GPUs see bench/results/e2e_gpu.md)")
        say(f"   report:    {os.path.join(self.out, 'report.txt')} (and report.json)")
        say(f"   timeline:  {svg} (open in a browser)")
        say(f"   trace:     {trace} (open in https://ui.perfetto.dev)")
        say(f"   event log: {os.path.join(state, 'events.jsonl')}")

    def choose_mode(self):
        """The mode to run, and a note on why when it is not the one asked for."""
        self.gpus = 0
        try:
            import torch  # noqa: F401
        except ImportError:
            if self.args.mode in ("gpu", "cpu"):
                raise DemoError(f"--mode {self.args.mode} needs PyTorch; install it with "
                                f"'{sys.executable} -m pip install torch' (or ./scripts/python-env.sh)")
            return "replay", (f"PyTorch is not installed for {sys.executable}: install it with "
                              f"'{sys.executable} -m pip install torch' (or ./scripts/python-env.sh in "
                              "the source tree) for the real PyTorch pipeline")
        if self.args.mode == "replay":
            return "replay", ""
        import torch
        self.gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if self.args.mode == "gpu" and self.gpus < 2:
            raise DemoError(f"--mode gpu needs at least 2 CUDA GPUs; PyTorch sees {self.gpus}")
        if self.args.mode == "cpu":
            return "cpu", ""
        if self.gpus >= 2:
            return "gpu", ""
        cores = len(os.sched_getaffinity(0))
        if cores > LANES:
            return "cpu", f"{self.gpus} CUDA GPU(s) visible to PyTorch; GPU mode needs 2 or more"
        return "replay", (f"{self.gpus} CUDA GPU(s) visible to PyTorch, and {cores} cores: a CPU "
                          "pipeline here would share every core with its side tasks, and on a small VM "
                          "that slows its compute by tens of percent however the tasks yield "
                          "(bench/results/demo_cpu_2core.txt); --mode cpu runs it anyway")


def cpu_stages() -> int:
    """CPU mode's pipeline depth: one stage per core this process may use,
    2 at least (a pipeline) and LANES at most."""
    return max(2, min(LANES, len(os.sched_getaffinity(0))))


def _at_least(least: float, kind):
    """An argparse type: a number of `kind` that is `least` or more (a usage error, status 2,
    before anything runs: --steps -5 ran the whole demo with "trainings of -5 steps")."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number")
        if not (value >= least and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"{text} is below {least:g}" if value < least else f"{text} is not a finite number")
        return value
    return parse


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="freeride demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["auto", "gpu", "cpu", "replay"], default="auto")
    p.add_argument("--out", help="a new or empty folder for the outputs (default: a fresh one under $TMPDIR)")
    p.add_argument("--steps", type=_at_least(1, int), default=None,
                   help="training iterations per training run (default: 100 on GPUs, 80 on CPU)")
    p.add_argument("--preset", default="1.3b", help="GPU mode: model size (tiny, small, 1.3b)")
    p.add_argument("--profile-seconds", type=_at_least(0.01, float), default=2.0, help="alone-rate measurement per task")
    p.add_argument("--gpu-hour-price", type=_at_least(0, float), default=3.0, help="for the money figures")
    p.add_argument("--rounds", type=_at_least(1, int), default=2,
                   help="CPU and replay modes: baseline and side-task trainings run in turn, B F F B "
                        "for 2 rounds, each of --steps steps")
    p.add_argument("--cpu-task-priority", choices=["idle", "normal"], default="idle",
                   help="CPU and replay modes: the daemon's --cpu-task-priority.  idle (SCHED_IDLE) keeps "
                        "a side task from taking its stage's core; normal runs it at the normal policy, "
                        "still only in bubbles, for machines that other work keeps busy (tests)")
    p.add_argument("--quick", action="store_true",
                   help="a short run to see that it works (30 steps, 0.5 s per alone rate); "
                        "its figures are rough")
    args = p.parse_args(argv)
    if args.quick:
        args.steps = args.steps or 30
        args.profile_seconds = 0.5
        args.rounds = 1
    if args.out:
        if os.path.exists(args.out) and os.listdir(args.out):
            print(f"freeride demo: --out {args.out} is not empty; give a new or empty folder",
                  file=sys.stderr)
            return 2
        os.makedirs(args.out, exist_ok=True)
    else:
        args.out = tempfile.mkdtemp(prefix="freeride-demo-")
    args.out = os.path.abspath(args.out)
    if shutil.which("freeride") is None:
        print("freeride demo: the freeride binaries are not on PATH; run it as 'freeride demo'",
              file=sys.stderr)
        return 2
    demo = Demo(args)
    try:
        demo.main()
    except DemoError as e:
        print(f"freeride demo: {e}", file=sys.stderr)
        print(f"freeride demo: logs are in {args.out}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nfreeride demo: interrupted", file=sys.stderr)
        return 130
    finally:
        demo.stop_daemons()
    return 0


if __name__ == "__main__":
    sys.exit(main())
