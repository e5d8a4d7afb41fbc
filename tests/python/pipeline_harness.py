"""What the CPU pipeline tests share: the real daemon with CPU lanes, side
tasks, training launched under torch.distributed.run, and the check that
side-task steps started only inside the bubbles the stages marked.

Used by pipeline_cpu_test.py (torch.distributed.pipelining),
deepspeed_cpu_test.py and megatron_cpu_test.py; RecordingStage also by the
tests of the marks themselves (integrations_test.py, marks_test.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time


def check(condition: bool, message: str) -> None:
    if not condition:
        print("FAIL:", message, flush=True)
        sys.exit(1)


def require(*modules: str) -> None:
    """Fails naming what is missing (scripts/python-env.sh installs them all), or exits 77 (skip)
    when the user asked for the torch tests to be skipped (FREERIDE_SKIP_TORCH=1)."""
    for name in modules:
        try:
            __import__(name)
        except ImportError as e:
            if os.environ.get("FREERIDE_SKIP_TORCH") == "1":
                print(f"skipped (FREERIDE_SKIP_TORCH=1): {e}")
                sys.exit(77)
            print(f"FAIL: {e}; run scripts/python-env.sh, which installs the pinned versions into .venv "
                  "(FREERIDE_SKIP_TORCH=1 skips this test instead)", flush=True)
            sys.exit(1)


def same_training(a: dict, b: dict, what: str) -> None:
    check(a["losses"] == b["losses"], f"{what}: losses differ: {a['losses']} vs {b['losses']}")
    check(a["checksums"] == b["checksums"], f"{what}: trained parameters differ")


class RecordingStage:
    """Stands in for the lane's Stage (freeride.stage) to record the host marks in `log`, in order
    (the mechanism under it has its own tests).  Used by integrations_test.py and marks_test.py."""

    attached = False

    def __init__(self, log: list):
        self.log = log

    def begin(self, slot, predicted_ns=0, free_memory_bytes=None):
        self.log.append(("begin", slot))

    def end(self):
        self.log.append("end")

    def close(self):
        pass


class Harness:
    """A daemon with `lanes` CPU lanes in a fresh temporary folder, and training runs against it."""

    def __init__(self, source: str, build: str, lanes: int):
        self.source, self.build, self.lanes = source, build, lanes
        self.tmp = tempfile.mkdtemp(prefix="frpy-")
        self.socket = os.path.join(self.tmp, "d.sock")
        self.state = os.path.join(self.tmp, "state")
        self.env = dict(os.environ, PYTHONPATH=os.path.join(source, "python"), FREERIDE_SOCKET=self.socket,
                        FREERIDE_LIB=os.path.join(build, "libfreeride.so"), PYTHONWARNINGS="default")
        self.daemon = None
        self.pending: list[str] = []  # submitted tasks not yet seen through their init

    def cli(self, command: str, *args: str) -> str:
        return subprocess.run([os.path.join(self.build, "freeride"), command, "--socket", self.socket, *args],
                              env=self.env, check=True, capture_output=True, text=True, timeout=60).stdout

    def start_daemon(self) -> None:
        """Its side tasks at the normal policy, not SCHED_IDLE, so that the tests' "harvested" and
        "live" checks do not wait on cores that other work keeps busy (conftest.NORMAL_CPU_TASKS
        says why); they still run only inside bubbles, which is what the tests check."""
        self.daemon = subprocess.Popen(
            [os.path.join(self.build, "freeride"), "daemon", "--socket", self.socket, "--state-dir", self.state,
             "--cpu-lanes", str(self.lanes), "--cpu-task-priority", "normal",
             *(["--allow-root"] if os.geteuid() == 0 else [])],
            env=self.env, stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.tmp, "daemon.log"), "w"))
        for _ in range(100):
            if os.path.exists(self.socket):
                break
            time.sleep(0.05)
        check(os.path.exists(self.socket), "the daemon did not start")

    def stop_daemon(self) -> None:
        if self.daemon is not None:
            self.daemon.terminate()
            self.daemon.wait(timeout=30)

    def sgd_task(self) -> list[str]:
        """The C++ SGD side task on CPU, with 1 ms steps: small enough for CPU bubbles."""
        return [os.path.join(self.build, "tasks", "freeride-sgd"), "--generate-ratings", "200000",
                "--device", "cpu", "--epochs", "100000", "--step-ms", "1"]

    def submit(self, lane: int, name: str, command: list[str]) -> None:
        self.cli("submit", "--lane", str(lane), "--name", name, "--", *command)
        self.pending.append(name)

    def wait_until_live(self, timeout: float = 180) -> None:
        """Waits until every submitted task has finished its init (PAUSED or RUNNING).  A task runs
        only inside bubbles until it tells the daemon it uses the SDK, so a stand-in stage on each
        lane marks bubbles meanwhile, in slots (1000 + lane) that no test counts."""
        if not self.pending:
            return
        replay = os.path.join(self.build, "example_stage_replay")
        stages = [subprocess.Popen([replay, "--socket", self.socket, "--lane", str(lane), "--iterations",
                                    "100000000", "--busy", "sleep", "--busy-ms", "5", "--bubbles-ms", "20",
                                    "--slot-base", str(1000 + lane)], env=self.env, stdout=subprocess.DEVNULL)
                  for lane in range(self.lanes)]
        try:
            deadline = time.monotonic() + timeout
            states = {}
            while time.monotonic() < deadline:
                states = self.task_states()
                if all(states.get(name) in ("PAUSED", "RUNNING") for name in self.pending):
                    self.pending = []
                    return
                time.sleep(0.2)
            check(False, f"side tasks did not finish their init in {timeout:.0f} s: {states}")
        finally:
            for stage in stages:
                stage.kill()
                stage.wait()

    def train(self, script: str, name: str, args: list[str], nproc: int, env=None, background=False):
        """Runs examples/`script` with `args` and --out; (result, stderr), or (process, out) in the background."""
        self.wait_until_live()
        out = os.path.join(self.tmp, name + ".json")
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                   os.path.join(self.source, "examples", script), "--device", "cpu", *args, "--out", out]
        process = subprocess.Popen(command, env=env or self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        if background:
            return process, out
        return self.finish(process, out, name)

    @staticmethod
    def finish(process, out: str, name: str):
        try:
            stdout, stderr = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            check(False, f"{name}: training did not finish in 300 s")
        check(process.returncode == 0, f"{name}: training failed:\n{stdout[-2000:]}\n{stderr[-3000:]}")
        with open(out) as f:
            result = json.load(f)
        print(f"{name}: {stdout.strip().splitlines()[-1]}", flush=True)
        return result, stderr

    def check_no_daemon(self, train, base: dict, ranks: int) -> None:
        """train(env) with no daemon at FREERIDE_SOCKET trains as `base` did, each rank warning once."""
        alone, stderr = train(dict(self.env, FREERIDE_SOCKET=os.path.join(self.tmp, "no-daemon.sock")))
        same_training(base, alone, "no daemon")
        warnings = stderr.count("freeride: no daemon at")
        check(warnings == ranks, f"expected one warning per rank, got {warnings}:\n{stderr[-2000:]}")

    def steps_in_bubbles(self, min_bubbles: int) -> tuple[dict, list, list]:
        """Checks each logged side-task step started inside its bubble; (bubbles, steps, unlogged steps)."""
        bubbles, steps = {}, []
        for e in self.settled_events():
                if e["type"] == "bubble":
                    bubbles[(e["lane"], e["seq"])] = e
                elif e["type"] == "step":
                    steps.append(e)
        # The stand-in stage's bubbles (wait_until_live), and steps in them, are not the training's.
        warm_up = {key for key, b in bubbles.items() if b["slot"] >= 1000}
        bubbles = {key: b for key, b in bubbles.items() if key not in warm_up}
        steps = [s for s in steps if (s["lane"], s["bubble_seq"]) not in warm_up]
        check(len(bubbles) >= min_bubbles, f"only {len(bubbles)} bubbles were logged")
        # A step is logged with its bubble's event, except when the lane
        # never accounted for that bubble: it fell more than the stage's ring
        # (256 bubbles) behind, which a lane thread starved on a 2-core machine
        # running many busy processes can.  Such steps are logged "late" under a
        # later bubble.
        unlogged = [s for s in steps if (s["lane"], s["bubble_seq"]) not in bubbles]
        check(all(s.get("late") for s in unlogged), f"a step of an unknown bubble: {unlogged[:1]}")
        check(len(unlogged) <= len(steps) // 2,
              f"{len(unlogged)} of {len(steps)} steps ran in bubbles the lanes never logged")
        for s in steps:
            b = bubbles.get((s["lane"], s["bubble_seq"]))
            if b is not None:
                check(b["begin_ns"] <= s["start_ns"] <= b["end_ns"],
                      f"step started outside its bubble: step {s}, bubble {b}")
        return bubbles, steps, unlogged

    def settled_events(self, timeout: float = 60) -> list[dict]:
        """The event log once the daemon has written what it had: it writes in batches, a bubble's
        events up to 100 ms after the bubble (more on a loaded machine), so the log is read until
        two reads 0.5 s apart agree (the timeout only guards a hang).  Whole lines only."""
        path = os.path.join(self.state, "events.jsonl")
        deadline = time.monotonic() + timeout
        last = None
        while True:
            with open(path) as f:
                text = f.read()
            if text == last or time.monotonic() > deadline:
                break
            last = text
            time.sleep(0.5)
        return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n") and line.strip()]

    def harvested_by_lane(self, bubbles: dict, steps: list) -> dict[int, float]:
        work = {lane: 0.0 for lane in range(self.lanes)}
        for s in steps:
            if (s["lane"], s["bubble_seq"]) in bubbles:
                work[s["lane"]] += s["units"]
        return work

    def task_states(self) -> dict[str, str]:
        return {t["spec"]["name"]: t["state"] for t in json.loads(self.cli("status", "--json", "--all"))["tasks"]["tasks"]}
