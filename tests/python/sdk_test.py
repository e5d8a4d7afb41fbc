"""The Python side-task SDK (no torch needed): freeride.run_task through
libfreeride's runner, alone and under the real daemon.

Usage: sdk_test.py SOURCE_DIR BUILD_DIR
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

SOURCE, BUILD = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="frsdk-")
ENV = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "python"),
           FREERIDE_LIB=os.path.join(BUILD, "libfreeride.so"))

# Counts to --total, one unit per step; 'boom' makes step 3 raise.  Its
# checkpoint is the count, so a resumed run ends on the same total.
TASK = textwrap.dedent("""
    import sys, time, freeride
    class Count(freeride.IterativeTask):
        unit = "counts"
        def __init__(self, total, boom):
            self.total, self.boom, self.n = total, boom, 0
        def step(self):
            self.n += 1
            if self.boom and self.n == 3:
                raise ValueError("boom at 3")
            time.sleep(0.0005)
            return freeride.StepResult(1, self.n >= self.total)
        def finish(self):
            print(f"counted to {self.n}", flush=True)
        def save(self, path):
            open(path, "w").write(str(self.n)); return True
        def restore(self, path):
            self.n = int(open(path).read()); return True
    args = sys.argv[1:]
    total = int(args[args.index("--total") + 1])
    raise SystemExit(freeride.run_task(Count(total, "boom" in args), [sys.argv[0]] + [
        a for a in args if a in ("--standalone",)]))
""")


def check(condition: bool, message: str) -> None:
    if not condition:
        print("FAIL:", message, flush=True)
        sys.exit(1)


def main() -> None:
    script = os.path.join(TMP, "count.py")
    with open(script, "w") as f:
        f.write(TASK)

    # Alone: the runner's standalone line, after finish().
    p = subprocess.run([sys.executable, script, "--total", "40", "--standalone"], env=ENV,
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f"standalone run failed: {p.stderr}")
    lines = p.stdout.strip().splitlines()
    check(lines[0] == "counted to 40", f"finish() output: {lines}")
    result = json.loads(lines[-1])
    check(result["mode"] == "standalone" and result["unit"] == "counts", f"line: {result}")
    check(result["units"] == 40 and result["steps"] == 40 and result["finished"], f"line: {result}")
    check(result["step_ms_p50"] >= 0.4, f"steps sleep 0.5 ms: {result}")

    # A failing step: exit status 1, the reason and the traceback on stderr.
    p = subprocess.run([sys.executable, script, "--total", "40", "--standalone", "boom"], env=ENV,
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 1, f"a failing step must exit 1, got {p.returncode}")
    check("freeride: task failed: step failed: ValueError: boom at 3" in p.stderr, p.stderr)
    check("Traceback" in p.stderr, "the traceback is shown")

    # Under the daemon: killed after a checkpoint, resumed from it.
    socket, state = os.path.join(TMP, "d.sock"), os.path.join(TMP, "state")
    cli = os.path.join(BUILD, "freeride")
    daemon = subprocess.Popen([cli, "daemon", "--socket", socket, "--state-dir", state,
                               *(["--allow-root"] if os.geteuid() == 0 else [])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    stage = None
    try:
        for _ in range(200):
            if os.path.exists(socket):
                break
            time.sleep(0.05)
        env = dict(ENV, FREERIDE_CHECKPOINT_INTERVAL_MS="50")
        subprocess.run([cli, "submit", "--socket", socket, "--name", "count", "--retries", "1", "--",
                        sys.executable, script, "--total", "3000"], env=env, check=True,
                       capture_output=True, timeout=30)
        stage = subprocess.Popen([os.path.join(BUILD, "example_stage_replay"), "--socket", socket,
                                  "--iterations", "100000", "--busy-ms", "2", "--bubbles-ms", "8"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def show():
            out = subprocess.run([cli, "show", "--socket", socket, "count", "--json"], env=ENV,
                                 capture_output=True, text=True, timeout=30).stdout
            return json.loads(out)

        checkpoint = os.path.join(state, "tasks", "1", "checkpoint", "checkpoint")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (os.path.exists(checkpoint) and
                                                   float(show()["progress"]) > 100):
            time.sleep(0.05)
        info = show()
        check(info["state"] in ("RUNNING", "PAUSED"), f"the task must be live when killed: {info}")
        steps_before = int(info["steps"])
        os.kill(int(info["pid"]), signal.SIGKILL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and show()["state"] != "FINISHED":
            time.sleep(0.1)
        info = show()
        check(info["state"] == "FINISHED", f"not finished: {info}")
        check(int(info["attempts"]) == 2, f"relaunched once: {info}")
        task_dir = os.path.join(state, "tasks", "1")
        check("resumed from checkpoint" in open(os.path.join(task_dir, "stderr.log")).read(),
              "the relaunch restored the Python task's checkpoint")
        check("counted to 3000" in open(os.path.join(task_dir, "stdout.log")).read(),
              "the resumed count ends on the total")
        # Started over, the relaunch would have needed all 3000 steps again.
        check(int(info["steps"]) < steps_before + 3000,
              f"steps {info['steps']} after {steps_before} before the kill: the count was not resumed")
        print("PASS", flush=True)
    finally:
        if stage:
            stage.kill()
        daemon.terminate()
        daemon.wait(timeout=30)


if __name__ == "__main__":
    main()
