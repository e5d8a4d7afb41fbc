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
Usage: pipeline_cpu_test.py SOURCE_DIR BUILD_DIR.  Exit 77 (skip) without torch.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

try:
    import torch  # noqa: F401
    import numpy  # noqa: F401  (torch.distributed's object p2p needs it)
except ImportError as e:
    print(f"skipped: {e}; run scripts/test.sh, which installs torch==2.13.0 into .venv")
    sys.exit(77)

SOURCE, BUILD = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="frpy-")
SOCKET = os.path.join(TMP, "d.sock")
STATE = os.path.join(TMP, "state")
ENV = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"), FREERIDE_SOCKET=SOCKET,
           FREERIDE_LIB=os.path.join(BUILD, "libfreeride.so"), PYTHONWARNINGS="default")
CLI = os.path.join(BUILD, "freeride")


def check(condition: bool, message: str) -> None:
    if not condition:
        print("FAIL:", message, flush=True)
        sys.exit(1)


def cli(command: str, *args: str) -> str:
    return subprocess.run([CLI, command, "--socket", SOCKET, *args], env=ENV, check=True,
                          capture_output=True, text=True, timeout=60).stdout


def train(schedule: str, freeride: str, name: str, env=None, background=False):
    out = os.path.join(TMP, name + ".json")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
               os.path.join(SOURCE, "examples", "train_gpt_pipeline.py"), "--device", "cpu",
               "--steps", "5", "--warmup", "1", "--schedule", schedule, "--freeride", freeride,
               "--out", out]
    process = subprocess.Popen(command, env=env or ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    if background:
        return process, out

    return finish(process, out, name)


def finish(process, out, name):
    try:
        stdout, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        check(False, f"{name}: training did not finish in 300 s")
    check(process.returncode == 0, f"{name}: training failed:\n{stdout}\n{stderr[-3000:]}")
    with open(out) as f:
        result = json.load(f)
    print(f"{name}: {stdout.strip().splitlines()[-1]}", flush=True)
    return result, stderr


def same_training(a: dict, b: dict, what: str) -> None:
    check(a["losses"] == b["losses"], f"{what}: losses differ: {a['losses']} vs {b['losses']}")
    check(a["checksums"] == b["checksums"], f"{what}: trained parameters differ")


def main() -> None:
    daemon = subprocess.Popen([CLI, "daemon", "--socket", SOCKET, "--state-dir", STATE,
                               "--cpu-lanes", "4", *(["--allow-root"] if os.geteuid() == 0 else [])], env=ENV, stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(TMP, "daemon.log"), "w"))
    try:
        for _ in range(100):
            if os.path.exists(SOCKET):
                break
            time.sleep(0.05)
        check(os.path.exists(SOCKET), "the daemon did not start")
        sgd = [os.path.join(BUILD, "tasks", "freeride-sgd"), "--generate-ratings", "200000",
               "--device", "cpu", "--epochs", "100000", "--step-ms", "1"]
        llm = [sys.executable, "-m", "freeride.tasks.llm_inference", "--preset", "tiny", "--device",
               "cpu", "--batch", "2", "--prompt", "8", "--generate", "32"]
        for lane in range(4):
            cli("submit", "--lane", str(lane), "--name", f"side{lane}", "--", *(sgd if lane < 2 else llm))

        results = {}
        for schedule in ("1f1b", "gpipe", "interleaved"):
            base, _ = train(schedule, "off", f"{schedule}-off")
            harvested, _ = train(schedule, "on", f"{schedule}-on")
            same_training(base, harvested, schedule)
            check(all(m > 0 for m in harvested["marks"]), f"{schedule}: a rank sent no marks: {harvested['marks']}")
            check(base["marks"] == [0, 0, 0, 0], "FreeRide off must send no marks")
            results[schedule] = base

        # The side tasks' steps, against the bubbles the stages marked.
        time.sleep(0.5)  # the event log is written in batches
        bubbles, steps = {}, []
        with open(os.path.join(STATE, "events.jsonl")) as f:
            for line in f:
                e = json.loads(line)
                if e["type"] == "bubble":
                    bubbles[(e["lane"], e["seq"])] = e
                elif e["type"] == "step":
                    steps.append(e)
        check(len(bubbles) > 50, f"only {len(bubbles)} bubbles were logged")
        harvested_by_lane = {lane: 0.0 for lane in range(4)}
        overrun = 0
        # A step is logged with its bubble's event, except when the lane
        # never accounted for that bubble: it fell more than the stage's ring
        # (256 bubbles) behind, which a lane thread starved on a 2-core machine
        # running 9 busy processes can.  Such steps are logged "late" under a
        # later bubble.
        unlogged = [s for s in steps if (s["lane"], s["bubble_seq"]) not in bubbles]
        check(all(s.get("late") for s in unlogged), f"a step of an unknown bubble: {unlogged[:1]}")
        check(len(unlogged) <= len(steps) // 2,
              f"{len(unlogged)} of {len(steps)} steps ran in bubbles the lanes never logged")
        for s in steps:
            b = bubbles.get((s["lane"], s["bubble_seq"]))
            if b is None:
                continue
            check(b["begin_ns"] <= s["start_ns"] <= b["end_ns"],
                  f"step started outside its bubble: step {s}, bubble {b}")
            harvested_by_lane[s["lane"]] += s["units"]
            overrun += s["overrun_ns"]
        states = {t["spec"]["name"]: t["state"] for t in json.loads(cli("status", "--json", "--all"))["tasks"]["tasks"]}
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
        daemon.send_signal(signal.SIGSTOP)
        try:
            frozen, _ = train("1f1b", "on", "1f1b-daemon-frozen")
        finally:
            daemon.send_signal(signal.SIGCONT)
        same_training(results["1f1b"], frozen, "daemon frozen")
        # ...a side task killed mid-run...
        process, out = train("1f1b", "on", "1f1b-task-killed", background=True)
        time.sleep(3)
        pid = json.loads(cli("show", "side2", "--json"))["pid"]
        if int(pid) > 0:
            os.kill(int(pid), signal.SIGKILL)
        killed, _ = finish(process, out, "1f1b-task-killed")
        same_training(results["1f1b"], killed, "side task killed")
        # ...and no daemon at all: one warning per rank.
        alone_env = dict(ENV, FREERIDE_SOCKET=os.path.join(TMP, "no-daemon.sock"))
        alone, stderr = train("1f1b", "on", "1f1b-no-daemon", env=alone_env)
        same_training(results["1f1b"], alone, "no daemon")
        warnings = stderr.count("freeride: no daemon at")
        check(warnings == 4, f"expected one warning per rank, got {warnings}:\n{stderr[-2000:]}")
        print("PASS", flush=True)
    finally:
        daemon.send_signal(signal.SIGCONT)
        daemon.terminate()
        daemon.wait(timeout=30)


if __name__ == "__main__":
    main()
