"""The Python side-task SDK (no torch needed): freeride.run_task through
libfreeride's runner, alone and under the real daemon."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import NORMAL_CPU_TASKS, Daemon

# Counts to --total, one unit per step; 'boom' makes step 3 raise.  Its
# checkpoint is the count, so a resumed run ends on the same total.
TASK = textwrap.dedent("""
    import os, sys, time, freeride
    class Count(freeride.IterativeTask):
        unit = "counts"
        def __init__(self, total, boom, hold):
            self.total, self.boom, self.n, self.hold = total, boom, 0, hold
        def step(self):
            if self.hold and self.n >= int(self.hold[0]) and not os.path.exists(self.hold[1]):
                return freeride.StepResult(idle=True)  # held until the test releases it
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
    hold = args[args.index("--hold") + 1:args.index("--hold") + 3] if "--hold" in args else None
    status = freeride.run_task(Count(total, "boom" in args, hold), [sys.argv[0]] + [
        a for a in args if a in ("--standalone",)])
    if "--die-on-the-way-out" in args:  # a crash after the end is reported, as in a driver's teardown
        os.kill(os.getpid(), 9)
    raise SystemExit(status)
""")




@pytest.fixture(scope="module")
def count_script(tmp_path_factory) -> str:
    script = tmp_path_factory.mktemp("sdk") / "count.py"
    script.write_text(TASK)
    return str(script)


def test_standalone_prints_the_alone_rate_after_finish(count_script, freeride_env):
    p = subprocess.run([sys.executable, count_script, "--total", "40", "--standalone"], env=freeride_env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"standalone run failed: {p.stderr}"
    lines = p.stdout.strip().splitlines()
    assert lines[0] == "counted to 40", f"finish() output: {lines}"
    result = json.loads(lines[-1])
    assert result["mode"] == "standalone" and result["unit"] == "counts", result
    assert result["units"] == 40 and result["steps"] == 40 and result["finished"], result
    assert result["step_ms_p50"] >= 0.4, f"steps sleep 0.5 ms: {result}"


def test_the_step_budget_is_unbounded_in_a_step_run_alone_and_0_outside_one(freeride_env, tmp_path):
    script = tmp_path / "budget.py"
    script.write_text(textwrap.dedent("""
        import freeride
        seen = []
        class Budget(freeride.IterativeTask):
            def step(self):
                seen.append(freeride.step_budget_ns())
                return freeride.StepResult(1, len(seen) >= 3, parts=4)
        outside = freeride.step_budget_ns()
        assert freeride.run_task(Budget(), ["budget.py", "--standalone"]) == 0
        print("budget", outside, *seen)
    """))
    p = subprocess.run([sys.executable, str(script)], env=freeride_env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    line = next(l for l in p.stdout.splitlines() if l.startswith("budget"))
    assert line.split()[1:] == ["0"] + [str(2**63 - 1)] * 3, line


def test_under_the_daemon_a_step_of_parts_is_learned_per_part(freeride_env, build_dir, tmp_path):
    """StepResult.parts travels through the C ABI to the daemon's estimate: the estimate the
    daemon reads is one of the steps it recorded (the event log's start_ns/end_ns, as the
    runner timed them) divided by the 6 parts the task returned.  No bound on how long a step
    takes: on a loaded machine the steps are slower, and the estimate with them."""
    script = tmp_path / "parts.py"
    script.write_text(textwrap.dedent("""
        import time, freeride
        class Parts(freeride.IterativeTask):
            def step(self):
                time.sleep(0.006)
                return freeride.StepResult(1, parts=6)
        raise SystemExit(freeride.run_task(Parts()))
    """))
    daemon = Daemon(build_dir, freeride_env, *NORMAL_CPU_TASKS)
    stage = None
    try:
        daemon.cli_run("submit", "--name", "parts", "--", sys.executable, str(script))
        stage = daemon.stage("2", "40")
        # The estimate is the p90 of the last 32 steps, each divided by its parts, so it is
        # always one of them.  A step's record reaches the event log after its bubble closes:
        # wait for it (the deadline only guards a hang).
        deadline = time.monotonic() + 120
        while True:
            info = daemon.show("parts")
            estimate = int(info["step_estimate_ns"])
            steps = [e for e in daemon.events() if e["type"] == "step" and e["task_id"] == int(info["id"])]
            per_part = {(e["end_ns"] - e["start_ns"]) // 6 for e in steps}
            if len(steps) >= 10 and estimate in per_part:
                break
            whole = {e["end_ns"] - e["start_ns"] for e in steps}
            assert time.monotonic() < deadline, (
                f"after {len(steps)} recorded steps the estimate {estimate} ns is no step's sixth "
                f"{sorted(per_part)[:40]}{' (it is a whole step)' if estimate in whole else ''}")
            time.sleep(0.1)
    finally:
        if stage:
            stage.kill()
        daemon.stop()


def test_a_failing_step_exits_1_with_the_reason_and_traceback(count_script, freeride_env):
    p = subprocess.run([sys.executable, count_script, "--total", "40", "--standalone", "boom"],
                       env=freeride_env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, f"a failing step must exit 1, got {p.returncode}"
    assert "freeride: task failed: step failed: ValueError: boom at 3" in p.stderr, p.stderr
    assert "Traceback" in p.stderr, "the traceback is shown"


@pytest.mark.parametrize("units", ["-5", "float('nan')", "float('inf')"])
def test_a_step_that_returns_units_that_are_no_count_counts_0_and_says_so(freeride_env, tmp_path, units):
    """Units are summed into the progress and valued at the alone rate: -5 or NaN made the
    standalone summary's units null, and so the alone rate `task-profile` reads."""
    script = tmp_path / "bad_units.py"
    script.write_text(textwrap.dedent(f"""
        import freeride
        class Bad(freeride.IterativeTask):
            n = 0
            def step(self):
                self.n += 1
                return freeride.StepResult({units} if self.n in (2, 3) else 1, self.n >= 4)
        raise SystemExit(freeride.run_task(Bad(), ["bad_units.py", "--standalone"]))
    """))
    p = subprocess.run([sys.executable, str(script)], env=freeride_env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.count("units of work (below 0 or not a number): counted as 0") == 1, p.stderr
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result["units"] == 2 and result["steps"] == 4, result


def test_killed_under_the_daemon_it_resumes_from_its_checkpoint(count_script, freeride_env, build_dir):
    daemon = Daemon(build_dir, freeride_env, *NORMAL_CPU_TASKS)
    stage = None
    try:
        env = dict(daemon.env, FREERIDE_CHECKPOINT_INTERVAL_MS="50")
        # The count holds at 200 until the kill: a count that could reach 400 between the
        # test's look and its kill would finish (deleting its checkpoint) and be killed exiting.
        release = os.path.join(daemon.dir, "release")
        daemon.cli_run("submit", "--name", "count", "--retries", "1", "--", sys.executable, count_script,
                       "--total", "400", "--hold", "200", release, env=env)
        stage = daemon.stage("2", "40")

        def show():
            return daemon.show("count")

        checkpoint = os.path.join(daemon.state, "tasks", "1", "checkpoint", "checkpoint")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (os.path.exists(checkpoint) and
                                                   float(show()["progress"]) >= 200 and
                                                   open(checkpoint).read() == "200"):
            time.sleep(0.05)
        info = show()
        assert info["state"] in ("RUNNING", "PAUSED"), f"the task must be live when killed: {info}"
        steps_before = int(info["steps"])
        os.kill(int(info["pid"]), signal.SIGKILL)
        open(release, "w").close()
        deadline = time.monotonic() + 600  # a hang guard: the task shares the cores with the machine's load
        while time.monotonic() < deadline and show()["state"] != "FINISHED":
            time.sleep(0.1)
        info = show()
        assert info["state"] == "FINISHED", f"not finished: {info}"
        assert int(info["attempts"]) == 2, f"relaunched once: {info}"
        task_dir = Path(daemon.state, "tasks", "1")
        assert "resumed from checkpoint" in (task_dir / "stderr.log").read_text(), \
            "the relaunch restored the Python task's checkpoint"
        assert "counted to 400" in (task_dir / "stdout.log").read_text(), \
            "the resumed count ends on the total"
        # Started over, the relaunch would have needed all 400 steps again.
        assert int(info["steps"]) < steps_before + 400, \
            f"steps {info['steps']} after {steps_before} before the kill: the count was not resumed"
    finally:
        if stage:
            stage.kill()
        daemon.stop()


def test_a_task_that_dies_after_reporting_its_end_is_finished_not_run_again(count_script, freeride_env,
                                                                           build_dir):
    """The SDK reports the end after finish() and after deleting the checkpoint, so a relaunch
    would start the whole task over: a death after that report is a finished task."""
    daemon = Daemon(build_dir, freeride_env, *NORMAL_CPU_TASKS)
    stage = None
    try:
        daemon.cli_run("submit", "--name", "count", "--retries", "2", "--", sys.executable, count_script,
                       "--total", "30", "--die-on-the-way-out")
        stage = daemon.stage("2", "40")
        deadline = time.monotonic() + 600  # a hang guard only
        while time.monotonic() < deadline and daemon.show("count")["state"] not in (
                "FINISHED", "FAILED", "CANCELLED"):
            time.sleep(0.1)
        info = daemon.show("count")
        assert info["state"] == "FINISHED", f"the work was done: {info}"
        assert int(info["attempts"]) == 1, f"not run again: {info}"
        assert "finished (the task reported its end), then killed by signal 9" in info["message"], info
        stdout = Path(daemon.state, "tasks", "1", "stdout.log").read_text()
        assert stdout.count("counted to 30") == 1, stdout
    finally:
        if stage:
            stage.kill()
        daemon.stop()


def test_a_peak_memory_hook_that_raises_or_lies_reports_the_peak_unknown(capfd) -> None:
    """An exception escaping a ctypes callback leaves its return value undefined: the SDK read a
    peak of 18 bytes from one, which `task-profile` would record as the task's memory."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    from freeride.task import IterativeTask, _bind

    class Raises(IterativeTask):
        def peak_memory_bytes(self) -> int:
            raise RuntimeError("no CUDA here")

    class Negative(IterativeTask):
        def peak_memory_bytes(self) -> int:
            return -5

    class Known(IterativeTask):
        def peak_memory_bytes(self) -> int:
            return 3 << 30

    peak = {name: _bind(task())[1][7] for name, task in
            (("raises", Raises), ("negative", Negative), ("known", Known))}
    assert peak["raises"](None) == 0
    assert "peak_memory_bytes() raised RuntimeError: no CUDA here" in capfd.readouterr().err
    assert peak["negative"](None) == 0
    assert peak["known"](None) == 3 << 30


def test_task_profile_runs_a_task_that_parses_its_own_arguments(freeride_env, build_dir, tmp_path):
    """task-profile asks for a run alone through FREERIDE_STANDALONE_SECONDS: appended to the
    command, --standalone --seconds T made a task whose argparse runs first exit 2."""
    script = tmp_path / "strict.py"
    script.write_text(textwrap.dedent("""
        import argparse, time, freeride
        args = argparse.ArgumentParser().parse_args()  # refuses any argument it does not know
        class Tick(freeride.IterativeTask):
            unit = "ticks"
            n = 0
            def step(self):
                time.sleep(0.001)
                self.n += 1
                return freeride.StepResult(1, self.n >= 2000)  # ends by itself when not timed
        raise SystemExit(freeride.run_task(Tick()))
    """))
    profile = tmp_path / "strict.profile.json"
    p = subprocess.run([str(build_dir / "freeride"), "task-profile", "--seconds", "0.3", "-o", str(profile), "--",
                        sys.executable, str(script)], env=freeride_env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    recorded = json.loads(profile.read_text())
    assert recorded["unit"] == "ticks" and recorded["rate_per_s"] > 0
    assert recorded["command"] == [sys.executable, str(script)]

    # Under a daemon (FREERIDE_TASK_SEGMENT set) the runner ignores it: it tries to attach (here to
    # a segment that is not there) and says so, instead of running alone for 0.2 s unasked.
    under = dict(freeride_env, FREERIDE_STANDALONE_SECONDS="0.2", FREERIDE_TASK_SEGMENT=str(tmp_path / "none"))
    p = subprocess.run([sys.executable, str(script)], env=under, capture_output=True, text=True, timeout=60)
    assert "running alone" in p.stderr, p.stderr

    # Set by hand to what is not a number of seconds: a clear exit (the C++ runner says so).
    bad = dict(freeride_env, FREERIDE_STANDALONE_SECONDS="soon")
    p = subprocess.run([sys.executable, str(script)], env=bad, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "FREERIDE_STANDALONE_SECONDS=soon is not a number of seconds above 0" in p.stderr, \
        p.stderr


def test_a_step_that_returns_text_fails_with_the_reason(freeride_env, tmp_path):
    """float() read a step's "3" as 3 units: a slip (a formatted log line returned), said as one."""
    script = tmp_path / "text.py"
    script.write_text(textwrap.dedent("""
        import freeride
        class Text(freeride.IterativeTask):
            def step(self):
                return "3"
        raise SystemExit(freeride.run_task(Text(), ["text.py", "--standalone"]))
    """))
    p = subprocess.run([sys.executable, str(script)], env=freeride_env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    assert "step() returned str '3': return a StepResult or a number of units" in p.stderr, p.stderr


def _running(command: str) -> bool:
    """Whether a process whose command line starts with `command` runs (zombies aside): the
    task's own `sleep`, not task-profile, whose arguments hold the same text."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline.startswith(command) and state != "Z":
            return True
    return False


def _wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + 60  # a hang guard only
    while time.monotonic() < deadline and not predicate():
        time.sleep(0.05)
    assert predicate(), what


@pytest.mark.parametrize("ending", ["timeout", "SIGTERM", "SIGINT"])
def test_task_profile_leaves_nothing_of_the_task_running(build_dir, tmp_path, ending):
    """The task and what it started (a shell's children, Python's workers) end with the
    profile: on --timeout only the shell was killed, and a SIGTERM to `task-profile` (a batch
    system's, `timeout`'s) left the whole task running, orphaned."""
    marker = f"3030{['timeout', 'SIGTERM', 'SIGINT'].index(ending)}.{os.getpid()}"
    command = [str(build_dir / "freeride"), "task-profile", "-o", str(tmp_path / "p.json"), "--seconds", "1",
               *(["--timeout", "2"] if ending == "timeout" else []), "--", "/bin/sh", "-c",
               f"sleep {marker}; true"]
    p = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_until(lambda: _running(f"sleep {marker}"), "the task never started")
        if ending != "timeout":
            p.send_signal(getattr(signal, ending))
        assert p.wait(timeout=120) != 0
        _wait_until(lambda: not _running(f"sleep {marker}"), f"the task's child outlived task-profile ({ending})")
    finally:
        p.kill()
        subprocess.run(["pkill", "-f", f"sleep {marker}"])
