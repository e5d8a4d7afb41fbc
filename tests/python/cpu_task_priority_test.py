"""The scheduling policy of a CPU lane's side task, read from the kernel: a real
daemon launches it in SCHED_IDLE by default (what keeps a task off a CPU stage's
core) and at the normal policy with --cpu-task-priority normal (what the tests
that wait on a task's progress use: conftest.NORMAL_CPU_TASKS).  No stage is
attached, so the task stays stopped: nothing here depends on speed."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from conftest import Daemon


def launched_pid(daemon: Daemon, name: str) -> int:
    """The pid of task `name` once the daemon has launched it (stopped, until a bubble)."""
    deadline = time.monotonic() + 60  # a hang guard: a launch takes milliseconds
    while True:
        info = daemon.show(name)
        if int(info.get("pid", 0)) > 0:
            return int(info["pid"])
        assert time.monotonic() < deadline, f"the task was never launched: {info}"
        time.sleep(0.05)


@pytest.mark.parametrize("args, policy, isolation", [
    ((), os.SCHED_IDLE, "ISOLATION_CPU_SCHED_IDLE"),
    (("--cpu-task-priority", "idle"), os.SCHED_IDLE, "ISOLATION_CPU_SCHED_IDLE"),
    (("--cpu-task-priority", "normal"), os.SCHED_OTHER, "ISOLATION_CPU_NORMAL"),
], ids=["default", "idle", "normal"])
def test_a_cpu_lanes_task_runs_under_the_policy_the_daemon_was_given(args, policy, isolation, build_dir,
                                                                       freeride_env):
    daemon = Daemon(build_dir, freeride_env, "--cpu-lanes", "1", *args)
    try:
        # "normal" is the daemon's own policy: the test means SCHED_OTHER by it.
        assert os.sched_getscheduler(daemon.process.pid) == os.SCHED_OTHER, \
            "run the tests at the normal policy (not under chrt)"
        daemon.cli_run("submit", "--name", "sleeper", "--", "/bin/sleep", "600")
        pid = launched_pid(daemon, "sleeper")
        assert os.sched_getscheduler(pid) == policy, (
            f"task {pid} runs under policy {os.sched_getscheduler(pid)}, not {policy} "
            f"(SCHED_IDLE is {os.SCHED_IDLE}, SCHED_OTHER {os.SCHED_OTHER})")
        lanes = json.loads(daemon.cli_run("status", "--json"))["stats"]["lanes"]
        assert [lane["isolation"] for lane in lanes] == [isolation], lanes
    finally:
        daemon.stop()


def test_an_unknown_priority_is_refused_naming_the_choices(build_dir, tmp_path):
    p = subprocess.run([str(build_dir / "freeride"), "daemon", "--socket", str(tmp_path / "d.sock"),
                        "--state-dir", str(tmp_path / "state"), "--cpu-task-priority", "low"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, p.stdout + p.stderr
    assert "--cpu-task-priority" in p.stderr and "idle" in p.stderr and "normal" in p.stderr, p.stderr
    assert not (tmp_path / "d.sock").exists() and not (tmp_path / "state").exists()
